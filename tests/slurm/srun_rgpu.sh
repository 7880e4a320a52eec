#!/usr/bin/env bash
# End to end with a real Slurm (Debian's slurmctld and slurmd on localhost, tests/slurm/cluster.sh)
# and rgpu's SPANK plugin (slurm/): `srun --rgpu PROGRAM` places a GPU through the registry with
# the job's identity, runs the tasks with rgpu's faces preloaded and the token in their
# environment, and releases the lease when the step ends; sacct shows the job and `rgpu bill
# --job` its usage. A CUDA program on a softgpu server, checked for its answer; two programs in
# one task and two tasks run under the step's lease; a batch job and a step inside it; a job of
# user nobody, whose placement and release run as nobody (real and effective ids); a step
# without --rgpu gets nothing of rgpu; a tenant whose key the registry refuses gets no GPU and the
# step fails, saying why (and sacct says FAILED); --rgpu=2 is refused by srun; `rgpu run
# --registry` inside a job bills under the job's name too.
#   srun_rgpu.sh BIN_DIR PROGRAMS_DIR PLUGIN
# Exits 77 (skipped) only where Slurm cannot start: not installed, or not root.
set -uo pipefail
bin=$(cd "$1" && pwd) programs=$(cd "$2" && pwd)
if [ -z "${3:-}" ] || [ ! -f "$3" ]; then
  echo "srun_rgpu: the SPANK plugin was not built (no slurm/spank.h: apt-get install libslurm-dev)"
  exit 77
fi
plugin=$(realpath "$3")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/cluster.sh"
work=$(mktemp -d /tmp/rgpu-slurm.XXXXXX)
chmod 755 "$work"  # the jobs of an ordinary user read slurm.conf in it
registry="" server=""
cleanup() {
  slurm_cluster_stop
  kill $registry $server 2>/dev/null
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "srun_rgpu: $*"
  slurm_cluster_logs
  echo "-- registry log"; tail -15 "$work/registry.log"
  echo "-- server log"; tail -15 "$work/server.log"
  exit 1
}
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

printf 'gpu 0.002 1 rgpu softgpu\n' >"$work/prices"
"$bin/rgpu-registry" --listen 127.0.0.1:0 --db "$work/registry.db" --signing-key "$work/key.pem" \
  --prices "$work/prices" --port-file "$work/port" --heartbeat-ms 500 2>"$work/registry.log" &
registry=$!
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
[ -s "$work/port" ] || fail "registry did not start"
export RGPU_REGISTRY=$(cat "$work/port")
admin() { RGPU_ADMIN_KEY_FILE=$work/registry.db.admin-key "$bin/rgpu" "$@"; }
pkey=$(admin provider create acme --json | json 'd["provider_key"]') || fail "provider create"
alice=$(admin tenant create alice --json | json 'd["api_key"]') || fail "tenant create"
"$bin/rgpu-server" --listen tcp://127.0.0.1:0 --backend softgpu --registry "$RGPU_REGISTRY" \
  --provider-key "$pkey" --name host1 --port-file "$work/url" 2>"$work/server.log" &
server=$!
for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.05; done
[ -s "$work/url" ] || fail "server did not start"
for _ in $(seq 200); do
  admin gpus --json 2>/dev/null | grep -q '"state": "available"' && break
  sleep 0.05
done

slurm_cluster_start "$work/slurm" \
  "required $plugin memory=256M ttl=600 wait=30"  # it finds rgpu and the faces beside itself
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || fail "Slurm did not start"

leases() { admin gpus --json | json 'd[0]["leases"]'; }
leases_drop_to_zero() {
  for _ in $(seq 300); do [ "$(leases)" = 0 ] && return 0; sleep 0.1; done
  return 1
}

# One task, two CUDA programs one after the other under the step's lease.
RGPU_API_KEY=$alice srun -J vadd --rgpu -n1 sh -c \
  'echo "job $SLURM_JOB_ID as $RGPU_JOB on $RGPU_SERVER"; "$0"/driver_vector_add && "$0"/driver_saxpy_streams' \
  "$programs" >"$work/job1.out" 2>"$work/job1.err" || fail "srun --rgpu: $(cat "$work/job1.out" "$work/job1.err")"
job=$(sed -n 's/^job \([0-9]*\) as .*/\1/p' "$work/job1.out")
[ -n "$job" ] || fail "no job id in: $(cat "$work/job1.out")"
grep -q "^job $job as slurm:rgputest:$job on $(cat "$work/url")$" "$work/job1.out" ||
  fail "the task's environment: $(cat "$work/job1.out")"
grep -q "^vector_add: 100000 elements OK$" "$work/job1.out" && grep -q "^saxpy_streams: OK$" "$work/job1.out" ||
  fail "the programs' answers: $(cat "$work/job1.out")"
leases_drop_to_zero || fail "the step's lease was not released when it ended ($(leases) left)"
echo "srun_rgpu: job $job ran two CUDA programs on $(cat "$work/url"); its lease was released"

# Two tasks of one step share the node's lease; each runs a program.
RGPU_API_KEY=$alice srun -J two --rgpu --rgpu-memory=128M -n2 "$programs/driver_vector_add" \
  >"$work/job2.out" 2>&1 || fail "two tasks: $(cat "$work/job2.out")"
[ "$(grep -c "^vector_add: 100000 elements OK$" "$work/job2.out")" = 2 ] || fail "two tasks: $(cat "$work/job2.out")"
leases_drop_to_zero || fail "the two-task step's lease was not released"

# A batch job: the script's programs run under the batch step's lease, and an srun inside it
# gets a lease of its own step.
cat >"$work/batch.sh" <<SCRIPT
#!/bin/sh
echo "batch \$RGPU_JOB"
"$programs/driver_vector_add" && srun -n1 "$programs/driver_saxpy_streams"
SCRIPT
RGPU_API_KEY=$alice sbatch --wait --rgpu -o "$work/batch.out" "$work/batch.sh" >"$work/sbatch.out" 2>&1 ||
  fail "sbatch --rgpu: $(cat "$work/sbatch.out" "$work/batch.out" 2>/dev/null)"
grep -q "^batch slurm:rgputest:[0-9]*$" "$work/batch.out" && grep -q "elements OK" "$work/batch.out" &&
  grep -q "saxpy_streams: OK" "$work/batch.out" || fail "the batch job: $(cat "$work/batch.out")"
leases_drop_to_zero || fail "the batch job's leases were not released"

# An ordinary user's job: the plugin places and releases as that user (slurmstepd is root).
if id nobody >/dev/null 2>&1; then
  (cd /tmp && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" RGPU_API_KEY="$alice" \
    RGPU_REGISTRY="$RGPU_REGISTRY" srun --rgpu -n1 sh -c 'echo "uid $(id -u)"; "$0"/driver_vector_add' \
    "$programs") >"$work/nobody.out" 2>&1 || fail "a job of user nobody: $(cat "$work/nobody.out")"
  grep -q "^uid $(id -u nobody)$" "$work/nobody.out" && grep -q "elements OK" "$work/nobody.out" ||
    fail "a job of user nobody: $(cat "$work/nobody.out")"
  leases_drop_to_zero || fail "user nobody's lease was not released"
  # The placement and the release run as the job's user alone (real and effective ids; the
  # release runs from slurmstepd's root): a recording rgpu in plugstack.conf (read at each step)
  # notes their ids.
  cat >"$work/rgpu-recording" <<SCRIPT
#!/bin/sh
echo "\$1 \$(id -ru) \$(id -u) \$(id -rg) \$(id -g)" >>"$work/ids"
exec "$bin/rgpu" "\$@"
SCRIPT
  chmod 755 "$work/rgpu-recording"
  install -m 666 /dev/null "$work/ids"
  cp "$slurm_dir/plugstack.conf" "$work/plugstack.saved"
  sed -i "s|\$| rgpu=$work/rgpu-recording|" "$slurm_dir/plugstack.conf"
  (cd /tmp && runuser -u nobody -- env SLURM_CONF="$SLURM_CONF" RGPU_API_KEY="$alice" \
    RGPU_REGISTRY="$RGPU_REGISTRY" srun --rgpu -n1 true) >"$work/nobody-ids.out" 2>&1 ||
    fail "a job of nobody with the recording rgpu: $(cat "$work/nobody-ids.out")"
  cp "$work/plugstack.saved" "$slurm_dir/plugstack.conf"
  leases_drop_to_zero || fail "user nobody's second lease was not released"
  ids="$(id -u nobody) $(id -u nobody) $(id -g nobody) $(id -g nobody)"
  [ "$(cat "$work/ids")" = "$(printf 'place %s\nlease %s' "$ids" "$ids")" ] ||
    fail "rgpu ran with other ids than the job's ($ids): $(cat "$work/ids")"
fi

# Without --rgpu a step gets nothing of rgpu: the CUDA program finds no driver.
RGPU_API_KEY=$alice srun -n1 sh -c 'echo "token=${RGPU_TOKEN:-none} preload=${LD_PRELOAD:-none}"' \
  >"$work/plain.out" 2>&1 || fail "plain srun: $(cat "$work/plain.out")"
grep -q "^token=none preload=none$" "$work/plain.out" || fail "a plain step got rgpu: $(cat "$work/plain.out")"
RGPU_API_KEY=$alice srun -n1 "$programs/driver_vector_add" >"$work/nodriver.out" 2>&1 &&
  fail "a CUDA program ran without --rgpu: $(cat "$work/nodriver.out")"

# A key the registry refuses: no GPU, the step fails before the program runs, saying why.
RGPU_API_KEY=not-a-key srun -n1 --rgpu sh -c 'echo task-ran' >"$work/refused.out" 2>&1 &&
  fail "a step ran with a refused key: $(cat "$work/refused.out")"
grep -q "task-ran" "$work/refused.out" && fail "the task ran without a placement"
grep -q "rgpu: no GPU placed for job slurm:rgputest:[0-9]*: rgpu place: unknown API key" "$work/refused.out" ||
  fail "no reason given: $(cat "$work/refused.out")"
refused_job=$(sed -n 's/.*no GPU placed for job slurm:rgputest:\([0-9]*\):.*/\1/p' "$work/refused.out" | head -1)
# A malformed option is refused by srun itself.
srun -n1 --rgpu=2 true >"$work/two.out" 2>&1 && fail "--rgpu=2 accepted"
grep -q "one remote GPU" "$work/two.out" || fail "--rgpu=2: $(cat "$work/two.out")"

# sacct shows the job; the registry bills its usage under the job's name.
sacct -c -n -j "$job" -o JobID,JobName,State >"$work/sacct.out" 2>&1 || fail "sacct: $(cat "$work/sacct.out")"
grep -q "^ *$job  *vadd  *COMPLETED" "$work/sacct.out" || fail "sacct: $(cat "$work/sacct.out")"
sacct -c -n -j "$refused_job" -o JobID,State >"$work/sacct2.out" 2>&1
grep -q "^ *$refused_job  *FAILED" "$work/sacct2.out" || fail "the refused job in sacct: $(cat "$work/sacct2.out")"
for _ in $(seq 100); do
  n=$(RGPU_API_KEY=$alice "$bin/rgpu" usage --job "slurm:rgputest:$job" --json | json 'len(d)')
  [ "$n" = 2 ] && break
  sleep 0.1
done
RGPU_API_KEY=$alice "$bin/rgpu" usage --job "slurm:rgputest:$job" --json >"$work/usage.json" ||
  fail "usage --job"
RGPU_API_KEY=$alice "$bin/rgpu" bill --job "slurm:rgputest:$job" --json >"$work/bill.json" ||
  fail "bill --job"
python3 - "$work" "slurm:rgputest:$job" <<'PY' || fail "the job's usage and bill"
import json, sys
w, job = sys.argv[1], sys.argv[2]
usage = json.load(open(w + "/usage.json"))
bill = json.load(open(w + "/bill.json"))
assert len(usage) == 2, usage  # its two programs, one session each
assert all(u["job"] == job and u["calls"] > 0 and u["tenant"] == "alice" for u in usage), usage
sessions = [l for l in bill["lines"] if l["session"]]
assert len(sessions) == 2 and all(l["job"] == job for l in bill["lines"]), bill["lines"]
assert bill["total"] > 0, bill
print("srun_rgpu: %s: %d sessions, %d calls, billed %.6f %s" % (
    job, len(usage), sum(u["calls"] for u in usage), bill["total"], bill["currency"]))
PY
RGPU_API_KEY=$alice "$bin/rgpu" bill --job "slurm:rgputest:$job" | grep -q "job slurm:rgputest:$job" ||
  fail "the bill's table does not name the job"

# `rgpu run --registry` inside a job (no --rgpu) names the job too.
RGPU_API_KEY=$alice srun -n1 sh -c 'echo "job $SLURM_JOB_ID"; "$0" run --memory 256M -- "$1"' \
  "$bin/rgpu" "$programs/driver_vector_add" >"$work/viarun.out" 2>&1 ||
  fail "rgpu run in a job: $(cat "$work/viarun.out")"
job2=$(sed -n 's/^job \([0-9]*\)$/\1/p' "$work/viarun.out")
n=0
for _ in $(seq 100); do
  n=$(RGPU_API_KEY=$alice "$bin/rgpu" usage --job "slurm:rgputest:$job2" --json | json 'len(d)')
  [ "$n" = 1 ] && break
  sleep 0.1
done
[ "$n" = 1 ] || fail "rgpu run in job $job2: $n sessions under its name"
echo "srun_rgpu: placed with the job's identity, preloaded, released at the step's end, billed"
