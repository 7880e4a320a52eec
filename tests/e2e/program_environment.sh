#!/usr/bin/env bash
# The client runtime leaves the program's environment as it found it: while the runtime loads,
# UCX_MODULES is empty (UCX then loads no optional transport module, interpose/README.md), and
# afterwards the program sees no UCX_MODULES, or its own value unchanged. A Python program loads
# libcuda.so.1 under `rgpu run`, makes the first driver call (cuInit, which loads the runtime and
# connects to the server in RGPU_SERVER) and reads the variable through the C library.
#   program_environment.sh BIN_DIR
set -uo pipefail
bin=$1
probe='
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
r = cuda.cuInit(0)
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
v = libc.getenv(b"UCX_MODULES")
print("cuInit=%d UCX_MODULES=%s" % (r, "unset" if v is None else repr(v.decode())))
'
fail=0
out=$("$bin/rgpu" run -- python3 -c "$probe" 2>&1)
echo "without a value of its own: $out"
[[ "$out" == *"cuInit=0 UCX_MODULES=unset"* ]] || { echo "FAIL: the program's environment changed"; fail=1; }
out=$(UCX_MODULES=cma "$bin/rgpu" run -- python3 -c "$probe" 2>&1)
echo "with UCX_MODULES=cma: $out"
[[ "$out" == *"cuInit=0 UCX_MODULES='cma'"* ]] || { echo "FAIL: the program's own value changed"; fail=1; }
exit $fail
