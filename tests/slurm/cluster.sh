# A private Slurm cluster of one node on localhost, for tests (sourced): Debian's munged,
# slurmctld and slurmd with their own key, socket, ports, state and logs under a directory, so
# that nothing of the machine's own Slurm or munge is touched. Needs root (slurmd launches tasks
# as their users).
#   slurm_cluster_start DIR PLUGSTACK_LINE   starts it; exports SLURM_CONF; returns 77 (skip)
#                                            when Slurm is not installed, 1 when it does not start
#   slurm_cluster_stop                        stops it (safe to call twice)
#   slurm_cluster_logs                        the daemons' logs' tails

slurm_cluster_missing() {
  local cmd
  for cmd in munged slurmctld slurmd srun sacct sinfo; do
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || { echo "$cmd"; return; }
  done
}

slurm_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

slurm_cluster_start() {
  slurm_dir=$1
  local plugstack=$2 missing node ctld_port node_port
  missing=$(slurm_cluster_missing)
  if [ -n "$missing" ]; then
    echo "Slurm cannot start here: $missing is not installed (apt-get install slurmctld slurmd slurm-client munge)"
    return 77
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "Slurm cannot start here: slurmd must run as root"
    return 77
  fi
  PATH=$PATH:/usr/sbin
  node=$(hostname -s)
  ctld_port=$(slurm_free_port)
  node_port=$(slurm_free_port)
  mkdir -p "$slurm_dir/state" "$slurm_dir/spool"
  chmod 755 "$slurm_dir"
  dd if=/dev/urandom of="$slurm_dir/munge.key" bs=1024 count=1 status=none
  chmod 400 "$slurm_dir/munge.key"
  munged --key-file="$slurm_dir/munge.key" --socket="$slurm_dir/munge.sock" \
    --pid-file="$slurm_dir/munged.pid" --log-file="$slurm_dir/munged.log" \
    --seed-file="$slurm_dir/munge.seed" --force || return 1
  chmod 777 "$slurm_dir/munge.sock"  # every user of the cluster talks to it, as to munge's own
  cat >"$slurm_dir/slurm.conf" <<CONF
ClusterName=rgputest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$node_port
AuthType=auth/munge
AuthInfo=socket=$slurm_dir/munge.sock
CredType=cred/munge
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobCompType=jobcomp/filetxt
JobCompLoc=$slurm_dir/jobcomp.txt
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
PlugStackConfig=$slurm_dir/plugstack.conf
GresTypes=rgpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 Gres=rgpu:4 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
  echo "NodeName=$node Name=rgpu Count=4" >"$slurm_dir/gres.conf"
  echo "$plugstack" >"$slurm_dir/plugstack.conf"
  export SLURM_CONF=$slurm_dir/slurm.conf
  slurmctld -c || return 1
  slurmd || return 1
  local state=""
  for _ in $(seq 200); do
    state=$(sinfo -h -o %T 2>/dev/null)
    [ "$state" = idle ] && return 0
    sleep 0.1
  done
  echo "Slurm did not come up (node state '$state')"
  slurm_cluster_logs
  return 1
}

slurm_cluster_stop() {
  [ -n "${slurm_dir:-}" ] || return 0
  local daemon pid
  for daemon in slurmd slurmctld munged; do
    pid=$(cat "$slurm_dir/$daemon.pid" 2>/dev/null)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
  done
  for _ in $(seq 50); do
    pid=""
    for daemon in slurmd slurmctld munged; do
      p=$(cat "$slurm_dir/$daemon.pid" 2>/dev/null)
      [ -n "$p" ] && kill -0 "$p" 2>/dev/null && pid=$p
    done
    [ -z "$pid" ] && break
    sleep 0.1
  done
  for daemon in slurmd slurmctld munged; do
    pid=$(cat "$slurm_dir/$daemon.pid" 2>/dev/null)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  done
  slurm_dir=""
}

slurm_cluster_logs() {
  local log
  for log in slurmctld slurmd; do
    echo "-- $log log"
    tail -15 "$slurm_dir/$log.log" 2>/dev/null
  done
}
