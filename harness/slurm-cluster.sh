#!/usr/bin/env bash
# A real Slurm cluster on this machine, for tests and demos (Debian's slurm-wlm 22.05 and
# munge; installed here when missing, as root). Debian's Slurm is built with
# MULTIPLE_SLURMD, so N nodes are N slurmd daemons on one host, each on its own port.
#   harness/slurm-cluster.sh up [NODES]   start munged, slurmctld and NODES slurmd (2)
#   harness/slurm-cluster.sh down         stop every daemon this script started
#   harness/slurm-cluster.sh status       sinfo
# DNNBENCH_SLURM_CPUS=N makes each node declare N CPUs (default: this machine's).
# There is no systemd: the daemons are started directly and stopped by their pid files.
# State lives in $DNNBENCH_SLURM_DIR (/run/dnnbench/slurm as root, else
# ~/.cache/dnnbench/slurm); SLURM_CONF points there. The script runs as root, so it trusts
# nothing it did not make: the folder must be a real folder owned by this user and not
# writable by others; `up` replaces it with a fresh one (a new munge key each time); a pid
# read from it is signalled only if that process is the daemon it names. An `up` that
# fails stops the daemons it started.
set -euo pipefail
if [ "$(id -u)" -eq 0 ]; then default_dir=/run/dnnbench/slurm; else default_dir=$HOME/.cache/dnnbench/slurm; fi
dir=${DNNBENCH_SLURM_DIR:-$default_dir}
conf=$dir/slurm.conf
marker=.dnnbench-slurm
action=${1:-status}
nodes=${2:-2}

die() { echo "slurm-cluster: $*" >&2; exit 2; }

# The state folder is ours, or we refuse to read or write anything in it.
check_dir() {
  [ -L "$dir" ] && die "$dir is a symbolic link; refusing to use it"
  [ -e "$dir" ] || return 0
  [ -d "$dir" ] || die "$dir is not a folder"
  [ "$(stat -c %u "$dir")" = "$(id -u)" ] || die "$dir belongs to another user"
  [ -z "$(find "$dir" -maxdepth 0 -perm /022)" ] || die "$dir is writable by others"
}

# A fresh private folder for `up`: an old one is removed only if this script made it.
fresh_dir() {
  check_dir
  if [ -e "$dir" ]; then
    if [ -f "$dir/$marker" ]; then rm -rf --one-file-system "$dir"
    elif [ -n "$(ls -A "$dir")" ]; then die "$dir is not empty and was not made by this script"
    fi
  fi
  mkdir -p "$(dirname "$dir")"
  mkdir -p -m 700 "$dir"
  touch "$dir/$marker"
}

stop_pidfile() {
  local f=$1 name=$2
  [ -f "$f" ] && [ ! -L "$f" ] || return 0
  local pid
  pid=$(head -c 20 "$f" | tr -dc 0-9)
  # only the daemon the file names: a stale file may hold a pid reused by anything else
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      # dead daemons linger as zombies (no init reaping here): state Z counts as gone
      state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo Z)
      [ "$state" = Z ] && break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  # cancel this cluster's jobs first: with proctrack/linuxproc, stopping slurmd would
  # leave their tasks running
  if [ -f "$conf" ] && [ -f "$dir/run/slurmctld.pid" ]; then
    jobs=$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      SLURM_CONF=$conf scancel $jobs 2>/dev/null || true
      for _ in $(seq 50); do
        [ -z "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)" ] && break
        sleep 0.2
      done
    fi
  fi
  for f in "$dir"/run/slurmd-*.pid; do stop_pidfile "$f" slurmd; done
  stop_pidfile "$dir/run/slurmctld.pid" slurmctld
  stop_pidfile "$dir/run/munged.pid" munged
  return 0
}

check_dir

case "$action" in
  up)
    if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
      [ "$(id -u)" -eq 0 ] || { echo "slurm-cluster: install slurm-wlm and munge (as root)" >&2; exit 1; }
      echo "installing slurm-wlm and munge ..." >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >&2
      apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
    fi
    case "$nodes" in ''|*[!0-9]*|0) die "NODES=$nodes: a whole number >= 1" ;; esac
    # CPUs each node declares: this machine's, or fewer (DNNBENCH_SLURM_CPUS) to stand for
    # compute nodes of another size than the host the harness runs on
    cpus=${DNNBENCH_SLURM_CPUS:-$(nproc)}
    case "$cpus" in ''|*[!0-9]*|0) die "DNNBENCH_SLURM_CPUS=$cpus: a whole number >= 1" ;; esac
    down
    # the daemons' ports are fixed: one taken means another cluster runs (perhaps one
    # started with another DNNBENCH_SLURM_DIR), and slurmctld would die without a word
    for p in 16817 $(seq 17001 $((17000 + nodes))); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        die "port $p is taken: another Slurm cluster runs here (stop it with its own \
DNNBENCH_SLURM_DIR and '$0 down'), or another program holds the port"
      fi
    done
    fresh_dir
    # from here on a failure stops every daemon this `up` started (die exits through it)
    trap 'down >/dev/null 2>&1' EXIT
    mkdir -p "$dir"/run "$dir"/log "$dir"/state "$dir"/munge "$dir"/spool
    # munge: a fresh key and socket of our own (no system munged needed)
    dd if=/dev/urandom bs=1 count=1024 of="$dir/munge/munge.key" status=none
    chmod 700 "$dir/munge"; chmod 400 "$dir/munge/munge.key"
    munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
      --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
      --seed-file="$dir/munge/seed"
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / nodes / 2 ))
    cat > "$conf" <<EOF
ClusterName=dnnbench
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
SlurmctldPort=16817
SlurmdPort=17001
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
TmpFS=$dir/spool/%n
NodeName=node[1-$nodes] NodeHostname=localhost Port=[17001-$((17000 + nodes))] CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=node[1-$nodes] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    for i in $(seq 1 "$nodes"); do mkdir -p "$dir/spool/node$i"; done
    export SLURM_CONF=$conf
    slurmctld -f "$conf" -i || die "slurmctld did not start; its log ends: \
$(tail -n 5 "$dir/log/slurmctld.log" 2>/dev/null)"
    for i in $(seq 1 "$nodes"); do
      slurmd -f "$conf" -N "node$i" || die "slurmd node$i did not start; its log ends: \
$(tail -n 5 "$dir/log/slurmd-node$i.log" 2>/dev/null)"
    done
    idle=0
    for _ in $(seq 150); do
      idle=$(sinfo -h -o "%T %D" 2>/dev/null | awk '$1=="idle" {n+=$2} END {print n+0}')
      [ "$idle" -ge "$nodes" ] && break
      sleep 0.2
    done
    [ "$idle" -ge "$nodes" ] || die "only $idle of $nodes nodes became idle within 30 s: \
$(sinfo -h -N -o '%N %T %E' 2>&1); slurmctld's log ends: $(tail -n 5 "$dir/log/slurmctld.log")"
    trap - EXIT
    sinfo
    echo "export SLURM_CONF=$conf"
    ;;
  down)
    down
    echo "slurm cluster stopped"
    ;;
  status)
    SLURM_CONF=$conf sinfo
    ;;
  *)
    echo "usage: $0 up [NODES] | down | status" >&2
    exit 2
    ;;
esac
