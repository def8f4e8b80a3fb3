#!/bin/sh
# Open MPI launch agent for emulated hosts (runners/emulated.py), used as
# `mpirun --mca plm_rsh_agent runners/mpirun-agent.sh`: mpirun calls it as
# `AGENT HOST COMMAND...` where ssh would be; it runs COMMAND inside the network
# namespace that owns HOST's lab address, and inside that host's CPU/memory limits
# when it has them (runners/cgroups.py). No ssh, nothing leaves the machine.
host=$1
shift
for ns in $(ip netns list | awk '{print $1}'); do
  case "$ns" in dnb-h*) ;; *) continue ;; esac
  if ip -n "$ns" -o -4 addr show dev eth0 | grep -q "inet $host/"; then
    for procs in /sys/fs/cgroup/dnnbench/"$ns"/cgroup.procs \
                 /sys/fs/cgroup/cpu/dnnbench/"$ns"/cgroup.procs \
                 /sys/fs/cgroup/cpuset/dnnbench/"$ns"/cgroup.procs \
                 /sys/fs/cgroup/memory/dnnbench/"$ns"/cgroup.procs; do
      if [ -f "$procs" ]; then echo $$ > "$procs" || exit 125; fi
    done
    exec nsenter --net="/run/netns/$ns" -- sh -c "$*"
  fi
done
echo "mpirun-agent: no emulated host has address $host" >&2
exit 1
