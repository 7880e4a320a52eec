#!/usr/bin/env bash
# Sets up and builds rgpu, then runs every test (unit and end-to-end on the software GPU).
# Usage: scripts/test.sh [ctest arguments...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root/build"
ctest --output-on-failure -j 2 "$@"
