#!/usr/bin/env bash
# rgpu smi as a tenant sees it (table, then JSON into JSON_OUT), against the server RGPU_SERVER
# names; on the real driver (BACKEND cuda) every device must have a temperature and a power
# reading (the server's host NVML), elsewhere none is expected.
#   smi_sensors.sh BIN_DIR BACKEND JSON_OUT
set -euo pipefail
bin=$1 backend=$2 json=$3
"$bin/rgpu" smi
"$bin/rgpu" smi --json >"$json"
[ "$backend" != cuda ] && exit 0
python3 - "$json" <<'PY'
import json, sys
gpus = json.load(open(sys.argv[1]))["gpus"]
missing = [g["index"] for g in gpus if g["temperature_c"] is None or g["power_mw"] is None]
if not gpus or missing:
    sys.exit("no temperature or power reading for devices %s" % missing)
PY
