#!/usr/bin/env bash
# A real Slurm cluster on this machine, for tests and demos (Debian's slurm-wlm 22.05 and
# munge; installed here when missing, as root). Debian's Slurm is built with
# MULTIPLE_SLURMD, so N nodes are N slurmd daemons on one host, each on its own port.
#   harness/slurm-cluster.sh up [NODES]   start munged, slurmctld and NODES slurmd (2)
#   harness/slurm-cluster.sh down         stop every daemon this script started
#   harness/slurm-cluster.sh status       sinfo
# There is no systemd: the daemons are started directly and stopped by their pid files.
# State lives in $DNNBENCH_SLURM_DIR (/tmp/dnnbench-slurm); SLURM_CONF points there.
set -euo pipefail
dir=${DNNBENCH_SLURM_DIR:-/tmp/dnnbench-slurm}
conf=$dir/slurm.conf
action=${1:-status}
nodes=${2:-2}

stop_pidfile() {
  local f=$1
  [ -f "$f" ] || return 0
  local pid
  pid=$(cat "$f")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
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
  for f in "$dir"/run/slurmd-*.pid "$dir"/run/slurmctld.pid "$dir"/run/munged.pid; do
    [ -e "$f" ] && stop_pidfile "$f"
  done
  return 0
}

case "$action" in
  up)
    if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
      [ "$(id -u)" -eq 0 ] || { echo "slurm-cluster: install slurm-wlm and munge (as root)" >&2; exit 1; }
      echo "installing slurm-wlm and munge ..." >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >&2
      apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
    fi
    down
    mkdir -p "$dir"/run "$dir"/log "$dir"/state "$dir"/munge "$dir"/spool
    # munge: a fresh key and socket of our own (no system munged needed)
    [ -f "$dir/munge/munge.key" ] || dd if=/dev/urandom bs=1 count=1024 of="$dir/munge/munge.key" status=none
    chmod 700 "$dir/munge"; chmod 400 "$dir/munge/munge.key"
    munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
      --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
      --seed-file="$dir/munge/seed"
    cpus=$(nproc)
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
    slurmctld -f "$conf" -i
    for i in $(seq 1 "$nodes"); do slurmd -f "$conf" -N "node$i"; done
    for _ in $(seq 100); do
      idle=$(sinfo -h -o "%T %D" 2>/dev/null | awk '$1=="idle" {n+=$2} END {print n+0}')
      [ "$idle" -ge "$nodes" ] && break
      sleep 0.2
    done
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
