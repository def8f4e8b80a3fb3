"""The `slurm` launcher: one sbatch job per run, or `srun` directly inside an allocation.

`sbatch_script` is a pure function (tests check its text and run `bash -n` on it): the
workers' common environment is exported, MASTER_ADDR is the first node's address as
Slurm knows it, and every rank is one Slurm task (`srun`), whose SLURM_PROCID /
SLURM_LOCALID / SLURM_NTASKS the worker reads as its rank (frameworks.worker.rank_info).
A parameter-server plan (MXNet: scheduler and servers) adds a second job step: one task
per role, each picking its role's variables by SLURM_PROCID, the scheduler on the first
node; the job ends with the workers, and a failed service ends them too.
Horovod ranks start with `srun --mpi=pmix` (MPI controller). `launch` submits the
script, follows the job's output file as it grows (so progress shows live), cancels the
job on timeout or Ctrl-C (`scancel`), and returns the same JobResult as every launcher.
Inside an existing allocation (SLURM_JOB_ID set) it runs the `srun` line itself.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from runners import container
from runners.process import LineCallback, StartCallback, run_job
from runners.spec import JobResult, ProcessResult, ProcessSpec

NAME = "slurm"
PER_RANK = {"DNNBENCH_RANK", "DNNBENCH_LOCAL_RANK", "RANK", "LOCAL_RANK", "MASTER_ADDR",
            "TF_CONFIG"}
EXIT_MARK = ":::DNNBENCH_SLURM_EXIT "
#: the first line a job writes: its id (a job array task's: ARRAYID_INDEX), so the output
#: file names its job even if whoever submitted it never learnt the id
JOB_MARK = ":::DNNBENCH_SLURM_JOB "
#: a line the launcher (never the job) adds to a job's output each time squeue reports a
#: new state or pending reason: progress and the stored output then say why a run waited
QUEUE_MARK = ":::DNNBENCH_SLURM_QUEUE "
#: bash: `dnnbench_node_ip NODE` prints the IPv4 address Slurm reaches NODE at: its
#: NodeAddr (a node name need not resolve, e.g. several slurmd on one host), resolved
#: (ps-lite's scheduler binds the address it is given: a name such as "localhost" fails).
#: The one place a node's address is looked up.
NODE_IP = ('dnnbench_node_ip() { local a ip; a=$(scontrol show node "$1" | tr " " "\\n" | '
           "sed -n 's/^NodeAddr=//p' | head -n 1); "
           'ip=$(getent ahostsv4 "${a:-$1}" | awk \'NR == 1 {print $1}\'); '
           'echo "${ip:-${a:-$1}}"; }')
#: Shell: the first node's address (a job step run inside an existing allocation)
FIRST_NODE_ADDR = (NODE_IP + '; dnnbench_node_ip "$(scontrol show hostnames '
                   '"$SLURM_JOB_NODELIST" | head -n 1)"')


class SlurmError(RuntimeError):
    pass


#: A task's host when the plan put it on a given node of the job (ps_hosts = "own":
#: servers, and the scheduler or chief, each on a node past the workers'): node k of the
#: allocation, in Slurm's order. Tasks without one go where the job's steps spread them.
NODE_MARK = "@N{}@"
_NODE_MARK_RE = re.compile(r"@N(\d+)@")


def placed_node(spec: ProcessSpec) -> int | None:
    """The node of the job a task was placed on (NODE_MARK), or None."""
    m = _NODE_MARK_RE.fullmatch(spec.host)
    return int(m[1]) if m else None


def job_nodes(specs: list[ProcessSpec], nodes: int) -> int:
    """Nodes the job allocates: the workers' `nodes`, and every node a task was placed on
    past them."""
    return max([nodes] + [k + 1 for k in map(placed_node, specs) if k is not None])


@dataclass
class SlurmOptions:
    """Site settings, not part of a measurement's identity."""

    partition: str = ""
    account: str = ""
    qos: str = ""
    constraint: str = ""
    extra: list[str] = field(default_factory=list)  # raw `#SBATCH` options, e.g. --qos=x
    workdir: str = "results/slurm"  # scripts and job output files
    gpus_per_node: int = 0
    mpi: str = "pmix"  # srun --mpi plugin for Horovod (MPI) jobs
    queue_wait_s: float = 3600.0  # how long a job may wait in the queue before it is cancelled


JOB_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def check_script_text(what: str, value: str, path: bool = False, option: bool = False) -> str:
    """`value` if it can be written into an sbatch script as one `#SBATCH` line's value,
    else SlurmError naming it. A control character (a newline above all) would end the
    line and put the rest of the value in the script as a command; whitespace would split
    the value (sbatch reads `#SBATCH` lines word by word)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise SlurmError(f"{what} {value!r}: contains a control character (a newline would "
                         "end the #SBATCH line and run the rest as a command)")
    if any(c.isspace() for c in value) and not option:
        raise SlurmError(f"{what} {value!r}: contains whitespace; sbatch would split it")
    if option and not value.startswith("-"):
        raise SlurmError(f"{what} {value!r}: an sbatch option starts with '-', e.g. "
                         "--qos=debug")
    if not path and not option and not re.fullmatch(r"[A-Za-z0-9._,:=@+-]+", value):
        raise SlurmError(f"{what} {value!r}: use letters, digits and . _ , : = @ + -")
    return value


def time_limit(timeout_s: float) -> str:
    """Slurm's limit for a run: its timeout plus a minute for start-up, whole minutes."""
    if not 0 < timeout_s <= 366 * 86400:  # also refuses NaN
        raise SlurmError(f"timeout {timeout_s!r} s: must be > 0 and at most a year")
    minutes = int(-(-(timeout_s + 60) // 60))
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def node_cpus(partition: str = "") -> int | None:
    """CPUs of one compute node, as Slurm knows them: inside an allocation its own
    (SLURM_CPUS_ON_NODE), else the smallest node of the partition (`sinfo`). None when
    Slurm cannot say; the harness's host is the login node and its core count is not
    the compute nodes'."""
    inside = os.environ.get("SLURM_CPUS_ON_NODE", "")
    if os.environ.get("SLURM_JOB_ID") and inside.isdigit():
        return int(inside)
    cpus = partition_nodes(partition)
    return min(cpus) if cpus else None


def partition_nodes(partition: str = "") -> list[int] | None:
    """CPUs of every node of the partition (`sinfo`), or None when Slurm cannot say."""
    cmd = ["sinfo", "-h", "-N", "-o", "%N %c"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    nodes = {}
    for line in out.splitlines():
        name, _, cpus = line.partition(" ")
        if cpus.strip().isdigit():
            nodes[name] = int(cpus)  # a node in several partitions is listed once each
    return list(nodes.values()) or None


def check_fits(specs: list[ProcessSpec], nodes: int, partition: str = "") -> None:
    """SlurmError, before anything is submitted, when no allocation could ever hold the
    job: more nodes than the partition has, or more CPUs per node (tasks per node x
    threads per task) than its largest node. Slurm itself accepts such a job and leaves
    it pending, so the sweep would wait out the whole queue time for nothing."""
    cpus = partition_nodes(partition)
    if cpus is None:
        return
    where = f"partition {partition!r}" if partition else "the default partition"
    total = job_nodes(specs, nodes)
    if total > len(cpus):
        own = (f" ({nodes} for the workers, {total - nodes} for the servers and the "
               "scheduler or chief: ps_hosts = 'own')" if total > nodes else "")
        raise SlurmError(f"the run needs nodes = {total}{own}, but {where} has {len(cpus)} "
                         f"node(s) (sinfo); use fewer nodes"
                         + (" or ps_hosts = 'shared'" if own else "")
                         + " or another partition")
    workers = computing(specs)
    per_node = -(-len(workers) // nodes)
    threads = int(workers[0].env.get("DNNBENCH_THREADS", "1"))
    fitting = sorted(cpus, reverse=True)[nodes - 1]  # CPUs of the nodes-th largest node
    if per_node * threads > fitting:
        raise SlurmError(
            f"the run needs {per_node} task(s) x threads = {threads}, {per_node * threads} "
            f"CPUs on each of {nodes} node(s), but {where} has "
            + (f"{nodes} nodes with at most {fitting}" if nodes > 1 else
               f"at most {fitting} CPUs per node")
            + f" (sinfo); set threads <= {max(1, fitting // per_node)} (or leave threads "
            "unset: dnnbench sizes them to the nodes), or fewer devices_per_node")


#: roles whose end is the job's end (the timed loop runs there)
MAIN_ROLES = ("worker", "chief")


def split_roles(specs: list[ProcessSpec]) -> tuple[list[ProcessSpec], list[ProcessSpec]]:
    """(the main tasks: workers, or TensorFlow's chief; the services: MXNet's scheduler and
    servers, TensorFlow's ps tasks and the workers that serve its chief)."""
    main = [s for s in specs if s.role in MAIN_ROLES and not s.service]
    return main, [s for s in specs if s not in main]


def computing(specs: list[ProcessSpec]) -> list[ProcessSpec]:
    """The tasks that do the training's compute, which size the allocation: the workers
    (a TensorFlow parameter-server job's workers serve its chief, but they compute)."""
    return [s for s in specs if s.role == "worker"] or split_roles(specs)[0]


def srun_line(specs: list[ProcessSpec], nodes: int, mpi: str = "",
              overlap: bool = False) -> list[str]:
    """The step of the workers (or TensorFlow's chief): block distribution over `nodes`
    nodes, from the node its first task was placed on (node 0 unless placed)."""
    per_node = -(-len(specs) // nodes)
    cmd = ["srun", f"--nodes={nodes}", f"--ntasks={len(specs)}",
           f"--ntasks-per-node={per_node}", "--kill-on-bad-exit=1", "--export=ALL"]
    if placed_node(specs[0]):
        cmd.append(f"--relative={placed_node(specs[0])}")
    if overlap:
        cmd.append("--overlap")
    if mpi:
        cmd.append(f"--mpi={mpi}")
    return cmd + list(specs[0].argv)


#: variables that name the rendezvous host: the job's first node's IP address
ROOT_KEYS = {"DMLC_PS_ROOT_URI", "HOROVOD_GLOO_RENDEZVOUS_ADDR"}
#: the rendezvous ports (on the first node): picked there when the job starts, since a
#: port free on the host that planned the job says nothing of a compute node's
PORT_KEYS = {"MASTER_PORT", "DMLC_PS_ROOT_PORT", "HOROVOD_GLOO_RENDEZVOUS_PORT"}
#: ps-lite's scheduler port: picked on the scheduler's node where that is not the first
ROOT_PORT = "DMLC_PS_ROOT_PORT"
#: bash: `dnnbench_free_port [N [LANE LANES]]` prints a TCP port P such that nothing
#: listens on P..P+N-1 here (the batch script runs on the job's first node, where the
#: rendezvous binds), taken below the kernel's ephemeral range (ip_local_port_range) where
#: it leaves room: a port the kernel may hand to an outgoing connection can be taken
#: between the pick and the bind, and a client that retries a port nobody listens on yet
#: can connect to itself. LANE of LANES: nodes picking at the same moment (cluster_ports)
#: draw from disjoint blocks, so nodes that share one host (a local test cluster) never
#: pick the same port (CI, 2026-12-04: two nodes picked 26228 and a TF ps task could not
#: start its gRPC server).
FREE_PORT = ('dnnbench_free_port() { local n=${1:-1} lane=${2:-0} lanes=${3:-1} lo=0 hi '
             'span o p i; '
             '{ read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range; } 2>/dev/null; '
             'span=$((lo - 20000 - n)); [ "$span" -ge 1000 ] || span=$((40000 - n)); '
             'dnnbench_lane() { local o=$1 w=$((n * lanes)); [ "$lanes" -gt 1 ] || '
             '{ echo "$o"; return; }; o=$((o / w * w + lane * n)); '
             '[ $((o + n)) -le "$span" ] || o=$((o - w)); echo "$o"; }; '
             'for _ in $(seq 100); do o=$((RANDOM % span)); '
             'p=$((20000 + $(dnnbench_lane "$o"))); '
             'for i in $(seq 0 $((n - 1))); do '
             '(exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null && continue 2; done; '
             'echo "$p"; return; done; '
             'echo $((20000 + $(dnnbench_lane $((${SLURM_JOB_ID:-0} % span))))); }')
#: the parameter-server roles' script, written by the batch script into the job's
#: directory (shared with the compute nodes, as the output file is) and run by every task
#: of the services step, each choosing its role by SLURM_PROCID
SERVICES_FILE = "$(dirname {output})/services-$SLURM_JOB_ID.sh"


def _task_addresses(workers: list[ProcessSpec], nodes: int, per_node: int) -> list[str]:
    """DNNBENCH_TASK_ADDRS: every worker task's node address and a port, in SLURM_PROCID
    order (block distribution: per_node tasks on each node in turn). A per-task cluster
    description (TensorFlow's TF_CONFIG) is then built by each worker from its rank. The
    ports are picked on the first node when the job starts (a port free on the host that
    planned the job says nothing of a compute node's) and count up from there, so tasks
    sharing a node never clash."""
    return [
        "# every worker's address, in task order: each builds its TF_CONFIG from it",
        FREE_PORT,
        f"dnnbench_base=$(dnnbench_free_port {len(workers)})",
        "DNNBENCH_TASK_ADDRS=; i=0",
        f"for k in $(seq 0 {nodes - 1}); do",
        '  v="DNNBENCH_N$k"',
        f"  for _ in $(seq {per_node}); do",
        f'    [ "$i" -lt {len(workers)} ] || break',
        '    DNNBENCH_TASK_ADDRS="$DNNBENCH_TASK_ADDRS${DNNBENCH_TASK_ADDRS:+,}${!v}:'
        '$((dnnbench_base + i))"',
        "    i=$((i + 1))",
        "  done",
        "done",
        "export DNNBENCH_TASK_ADDRS",
    ]


#: bash: replace each @N<k>@ in $1 by node k's IP address (DNNBENCH_N<k>, set by the
#: batch script), and each @P<k>.<i>@ by the i-th port of node k's block (DNNBENCH_P<k>,
#: picked on node k when the job starts): a task's TF_CONFIG names every task's node and
#: port, known only once allocated
FILL = ('dnnbench_fill() { local t="$1" k=0 v p i; while v="DNNBENCH_N$k"; [ -n "${!v-}" ]; do '
        't="${t//@N$k@/${!v}}"; p="DNNBENCH_P$k"; i=0; '
        'while [[ "$t" == *"@P$k."* && $i -lt 4096 ]]; do '
        't="${t//@P$k.$i@/$((${!p:?no port block picked on node $k} + i))}"; i=$((i + 1)); '
        'done; k=$((k + 1)); done; printf "%s" "$t"; }')


def _node_addresses(nodes: int) -> list[str]:
    """DNNBENCH_N0..: the IP address of every node of the job, in Slurm's order; the
    rendezvous (MASTER_ADDR, ps-lite's root) is the first."""
    return [
        "# every node's address, in Slurm's order; the rendezvous is on the first",
        NODE_IP,
        "k=0",
        f'for n in $(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n {nodes}); do',
        '  export "DNNBENCH_N$k=$(dnnbench_node_ip "$n")"; k=$((k + 1))',
        "done",
        FILL,
        'export MASTER_ADDR="${DNNBENCH_N0-}"',
    ]


def _cluster_nodes(main: list[ProcessSpec], services: list[ProcessSpec], nodes: int
                   ) -> dict[tuple[str, int], int]:
    """The node each task of TensorFlow's cluster runs on, by (job, index): the node it was
    placed on (placed_node; the harness places every parameter-server run's tasks), else
    the chief on the first node and service j on node j mod (service nodes), as
    `--distribution=cyclic` places unplaced services."""
    import json

    svc_nodes = min(nodes, len(services))
    node_of = {}
    for i, spec in enumerate(main + services):
        task = json.loads(spec.env["TF_CONFIG"])["task"]
        node = 0 if i < len(main) else (i - len(main)) % svc_nodes
        placed = placed_node(spec)
        node_of[(task["type"], task["index"])] = node if placed is None else placed
    return node_of


def cluster_templates(main: list[ProcessSpec], services: list[ProcessSpec], nodes: int
                      ) -> dict[int, str]:
    """TensorFlow's parameter-server cluster under Slurm: each spec's TF_CONFIG (by its
    index in main + services) with every address written @N<k>@:@P<k>.<i>@, the node the
    task will run on (_cluster_nodes) and the i-th port of the block picked free on that
    node when the job starts (cluster_ports). The plan's ports were free on the host that
    planned the job, which says nothing of a compute node's (until 2026-12-03 they were
    used as they were)."""
    import json

    node_of = _cluster_nodes(main, services, nodes)
    cluster = json.loads(main[0].env["TF_CONFIG"])["cluster"]
    used: dict[int, int] = {}
    template: dict[str, list[str]] = {}
    for job, addrs in cluster.items():
        template[job] = []
        for k in range(len(addrs)):
            node = node_of[(job, k)]
            template[job].append(f"@N{node}@:@P{node}.{used.get(node, 0)}@")
            used[node] = used.get(node, 0) + 1
    out = {}
    for i, spec in enumerate(main + services):
        task = json.loads(spec.env["TF_CONFIG"])["task"]
        out[i] = json.dumps({"cluster": template, "task": task})
    return out


def own_address(template: str) -> str:
    """The address a task of TensorFlow's cluster binds, from its TF_CONFIG template."""
    import json

    conf = json.loads(template)
    return conf["cluster"][conf["task"]["type"]][conf["task"]["index"]]


def cluster_ports(templates: dict[int, str], nodes: int) -> list[str]:
    """Batch-script lines that pick, on every node of the job, a block of ports free there
    (one task per node in one step, SLURM_NODEID saying which), as DNNBENCH_P<k>; a node
    that did not answer gets a block picked on the first node, in its own lane still (the
    nodes may share one host), and the job's output says so. The block is as long as the
    most tasks any node runs."""
    import json

    cluster = json.loads(next(iter(templates.values())))["cluster"]
    per_node: dict[str, int] = {}
    for addrs in cluster.values():
        for addr in addrs:
            node = addr.split(":", 1)[0]
            per_node[node] = per_node.get(node, 0) + 1
    block = max(per_node.values())
    pick = shlex.quote(f'{FREE_PORT}; echo "$SLURM_NODEID $(dnnbench_free_port {block} '
                       f'$SLURM_NODEID {nodes})"')
    return [
        "# TensorFlow's cluster: every task's port, from a block picked free on its node",
        FREE_PORT,
        "while read -r k p; do export \"DNNBENCH_P$k=$p\"; done < <(srun "
        f"--nodes={nodes} --ntasks={nodes} --ntasks-per-node=1 --overlap "
        f"--export=ALL bash -c {pick})",
        f"for k in $(seq 0 {nodes - 1}); do v=\"DNNBENCH_P$k\"; "
        '[ -n "${!v-}" ] && continue; '
        f'export "DNNBENCH_P$k=$(dnnbench_free_port {block} $k {nodes})"; '
        'echo "dnnbench: no port block from node $k; picked on the first node" >&2; done',
        'for k in $(seq 0 ' + str(nodes - 1) + '); do v="DNNBENCH_P$k"; '
        'echo "dnnbench: ports of node $k from ${!v}" >&2; done',
    ]


def _value(key: str, value: str, template: str | None) -> str:
    if key in ROOT_KEYS:
        return f"{key}=\"$DNNBENCH_ROOT_IP\""
    if key in PORT_KEYS:  # the batch script's pick, inherited (srun --export=ALL)
        return f"{key}=\"${{{key}:-{value}}}\""
    if key == "TF_CONFIG" and template is not None:  # filled first (services_script)
        return f'{key}="$dnnbench_conf"'
    return f"{key}={shlex.quote(value)}"


def services_script(services: list[ProcessSpec], templates: dict[int, str] | None = None
                    ) -> str:
    """A bash `case` over SLURM_PROCID: task i says which node it runs on (in the job's
    output, for whoever reads where a role ran), exports service i's variables and runs it.
    Task 0 is the first role of the plan (the scheduler), on the first node or the node it
    was placed on (placed_node). `templates` (service index -> TF_CONFIG with @N<k>@ hosts
    and @P<k>.<i>@ ports) are filled with the nodes' addresses and ports first: a task
    whose template cannot be filled exits before it starts, and its line names the
    address it binds."""
    templates = templates or {}
    lines = ["#!/bin/bash", FILL, 'case "$SLURM_PROCID" in']
    for i, svc in enumerate(services):
        exports = " ".join(_value(k, v, templates.get(i)) for k, v in sorted(svc.env.items()))
        fill, at = "", ""
        if i in templates:
            fill = (f"dnnbench_conf=\"$(dnnbench_fill {shlex.quote(templates[i])})\" "
                    "|| exit 1; ")
            at = f", at $(dnnbench_fill {shlex.quote(own_address(templates[i]))})"
        lines.append(f"  {i}) {fill}echo \"dnnbench: {svc.tag} on node "
                     f"${{SLURMD_NODENAME-?}}{at}\" >&2; export {exports}; exec "
                     + " ".join(shlex.quote(a) for a in svc.argv) + " ;;")
    lines += ['  *) echo "no service for task $SLURM_PROCID" >&2; exit 1 ;;', "esac"]
    return "\n".join(lines) + "\n"


def _services_lines(services: list[ProcessSpec], workers: list[ProcessSpec], nodes: int,
                    output: str, mpi: str, templates: dict[int, str] | None = None
                    ) -> list[str]:
    """Two job steps: the services (one task per role, each on the node it was placed on,
    laid out by a hostfile; services not placed, cyclic over the nodes from the first;
    sharing the workers' CPUs where they share nodes: they mostly wait) and the workers
    as in every job.
    The job ends with the workers: services still running then are stopped (ps-lite's
    end by themselves); a service step that fails first ends the workers at once, so a
    dead scheduler or server fails the job instead of leaving workers waiting for it."""
    svc_file = SERVICES_FILE.format(output=shlex.quote(output))
    svc_nodes = min(nodes, len(services))
    placed = [placed_node(s) for s in services]
    if all(k is not None for k in placed):
        # each service on the node the plan placed it on: task i on line i of the
        # hostfile (Slurm's arbitrary distribution, meant for a step's layout inside an
        # allocation)
        step = [
            'dnnbench_nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))',
            "printf '%s\\n' " + " ".join(f'"${{dnnbench_nodes[{k}]}}"' for k in placed)
            + ' > "$svc_file.hosts"',
            f'SLURM_HOSTFILE="$svc_file.hosts" srun --ntasks={len(services)} '
            "--distribution=arbitrary --overlap --overcommit --kill-on-bad-exit=1 "
            '--export=ALL bash "$svc_file" &']
    else:
        step = [f"srun --nodes={svc_nodes} --ntasks={len(services)} --distribution=cyclic "
                "--overlap --overcommit --kill-on-bad-exit=1 --export=ALL bash "
                '"$svc_file" &']
    return [
        f'svc_file="{svc_file}"',
        "cat > \"$svc_file\" <<'DNNBENCH_SERVICES'",
        services_script(services, templates).rstrip("\n"),
        "DNNBENCH_SERVICES",
        *step,
        "svc=$!",
        " ".join(shlex.quote(a) for a in srun_line(workers, min(nodes, len(workers)), mpi,
                                                   overlap=True)) + " &",
        "wrk=$!",
        "rc=",
        'while kill -0 "$wrk" 2>/dev/null; do',
        '  if [ -n "$svc" ] && ! kill -0 "$svc" 2>/dev/null; then',
        '    wait "$svc"; src=$?; svc=',
        '    if [ "$src" -ne 0 ]; then',
        '      echo "dnnbench: the services step (scheduler/servers) exited with $src; '
        'ending the workers" >&2',
        '      kill "$wrk" 2>/dev/null; rc=$src',
        "    fi",
        "  fi",
        "  sleep 1",
        "done",
        'wait "$wrk"; wrc=$?',
        'rc=${rc:-$wrc}',
        "# services that end by themselves (ps-lite's) get 30 s; servers that serve until "
        "stopped (TensorFlow's) are stopped now",
        'if [ -n "$svc" ]; then',
        f'  for _ in $(seq {0 if all(s.service for s in services) else 30}); do '
        'kill -0 "$svc" 2>/dev/null || break; sleep 1; done',
        '  kill "$svc" 2>/dev/null; wait "$svc" 2>/dev/null',
        "fi",
        'rm -f "$svc_file" "$svc_file.hosts"',
    ]



def _checked(specs: list[ProcessSpec], job_name: str, output: str, o: SlurmOptions
             ) -> tuple[list[ProcessSpec], list[ProcessSpec]]:
    """(workers, services) of a plan whose every text can go into a batch script."""
    if not specs:
        raise ValueError("no processes to launch")
    if not JOB_NAME_RE.fullmatch(job_name):
        raise SlurmError(f"job name {job_name!r}: use letters, digits, '.', '_' and '-'")
    check_script_text("output", output, path=True)
    for what, value in (("partition", o.partition), ("account", o.account),
                        ("qos", o.qos), ("constraint", o.constraint)):
        if value:
            check_script_text(what, value)
    for x in o.extra:
        check_script_text("sbatch option", x, option=True)
    workers, services = split_roles(specs)
    if not workers or any(s.argv != workers[0].argv for s in workers):
        raise SlurmError("a Slurm job step runs one program on every worker task; this "
                         "plan's workers run several")
    return workers, services


def _header(specs: list[ProcessSpec], nodes: int, job_name: str, output: str, time_s: float,
            o: SlurmOptions) -> list[str]:
    """The `#SBATCH` lines: what Slurm allocates (the job's shape) and where output goes."""
    sizing = computing(specs)
    per_node = -(-len(sizing) // nodes)
    threads = sizing[0].env.get("DNNBENCH_THREADS", "1")
    lines = [f"#SBATCH --job-name={job_name}", f"#SBATCH --nodes={job_nodes(specs, nodes)}",
             f"#SBATCH --ntasks-per-node={per_node}", f"#SBATCH --cpus-per-task={threads}",
             f"#SBATCH --time={time_limit(time_s)}", f"#SBATCH --output={output}"]
    for flag, value in (("partition", o.partition), ("account", o.account), ("qos", o.qos),
                        ("constraint", o.constraint)):
        if value:
            lines.append(f"#SBATCH --{flag}={value}")
    if o.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={o.gpus_per_node}")
    return lines + [f"#SBATCH {x}" for x in o.extra]


def _body(specs: list[ProcessSpec], nodes: int, output: str, o: SlurmOptions,
          horovod: bool) -> list[str]:
    """The commands of one run's job: its environment, the addresses its tasks need, its
    job steps, and the exit mark the harness reads its status from."""
    workers, services = split_roles(specs)
    per_node = -(-len(computing(specs)) // nodes)
    lines = ["# generated by dnnbench (runners/slurm.py): one task per worker"
             + (", and one per service (scheduler, server, ps, serving worker) in a step "
                "of their own" if services else ""),
             "set -u",
             f'if [ -n "${{SLURM_ARRAY_JOB_ID-}}" ]; then echo "{JOB_MARK}'
             f'${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}"; else echo "{JOB_MARK}'
             f'${{SLURM_JOB_ID-}}"; fi']
    env = {k: v for k, v in workers[0].env.items() if k not in PER_RANK}
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())
              if k not in ROOT_KEYS | PORT_KEYS]
    ports = sorted(PORT_KEYS & {k for sp in specs for k in sp.env})
    # the rendezvous: the first node, or the node the scheduler was placed on
    root = next((placed_node(s) for s in services if s.role == "scheduler"), None) or 0
    if ports:
        lines += ["# the rendezvous port, free on this (the first) node", FREE_PORT]
        lines += [f"export {k}=$(dnnbench_free_port)" for k in ports
                  if not (root and k == ROOT_PORT)]
    if ports and root and ROOT_PORT in ports:  # picked where the scheduler will bind it
        pick = shlex.quote(f"{FREE_PORT}; dnnbench_free_port")
        lines.append(f"export {ROOT_PORT}=$(srun --nodes=1 --ntasks=1 --relative={root} "
                     f"--overlap --export=ALL bash -c {pick})")
    # a cluster of roles with addresses (TensorFlow's parameter servers): every task's
    # TF_CONFIG names every task's node
    tf_cluster = bool(services) and all("TF_CONFIG" in sp.env for sp in specs)
    templates = cluster_templates(workers, services, nodes) if tf_cluster else {}
    if tf_cluster and len(workers) != 1:
        raise SlurmError("a TensorFlow parameter-server job has one chief; this plan has "
                         f"{len(workers)}")
    lines += _node_addresses(job_nodes(specs, nodes))
    if ROOT_KEYS & {k for sp in specs for k in sp.env}:
        lines.append(f'export DNNBENCH_ROOT_IP="${{DNNBENCH_N{root}-}}"')
    lines += [f'export {k}="$DNNBENCH_ROOT_IP"' for k in sorted(ROOT_KEYS & set(env))]
    if tf_cluster:
        lines += cluster_ports(templates, job_nodes(specs, nodes))
        lines.append(f'export TF_CONFIG="$(dnnbench_fill {shlex.quote(templates[0])})"')
        lines.append(f'echo "dnnbench: {workers[0].tag} at $(dnnbench_fill '
                     f'{shlex.quote(own_address(templates[0]))})" >&2')
    elif "TF_CONFIG" in workers[0].env:
        lines += _task_addresses(workers, nodes, per_node)
    mpi = o.mpi if horovod else ""
    if services:
        lines += _services_lines(services, workers, nodes, output, mpi,
                                 {i - 1: t for i, t in templates.items() if i})
    else:
        lines += [" ".join(shlex.quote(a) for a in srun_line(workers, nodes, mpi)), "rc=$?"]
    engine = workers[0].env.get(container.ENGINE_ENV)
    if engine:  # a task killed hard leaves its container: remove the job's on every node
        lines += ["# containers of this job still there (a task killed hard) go now",
                  f"srun --nodes={nodes} --ntasks-per-node=1 --overlap --export=ALL bash -c "
                  + shlex.quote(container.slurm_cleanup(engine))]
    return lines + [f'echo "{EXIT_MARK}$rc"', "exit $rc"]


def sbatch_script(specs: list[ProcessSpec], nodes: int, job_name: str, output: str,
                  time_s: float, options: SlurmOptions | None = None,
                  horovod: bool = False) -> str:
    """The batch script for one run: every spec is one task (same program for all)."""
    o = options or SlurmOptions()
    _checked(specs, job_name, output, o)
    return "\n".join(["#!/bin/bash", *_header(specs, nodes, job_name, output, time_s, o),
                      *_body(specs, nodes, output, o, horovod)]) + "\n"


@dataclass(frozen=True)
class BatchRun:
    """One run as a Slurm job: its plan and the allocation it asks for."""

    specs: list[ProcessSpec]
    nodes: int
    time_s: float
    horovod: bool = False

    def shape(self, o: SlurmOptions) -> tuple[str, ...]:
        """The allocation request without name and output file: runs of one shape can be
        the tasks of one job array."""
        lines = _header(self.specs, self.nodes, "x", "x", self.time_s, o)
        return tuple(lines[1:5] + lines[6:])  # not --job-name (0) nor --output (5)


ARRAY_OUTPUT = "%A_%a"  # a job array's output file name part: array job id, task index


def array_script(jobs: list[BatchRun], job_name: str, output: str,
                 options: SlurmOptions | None = None) -> str:
    """One batch script for runs of one shape: a job array whose task i runs run i (a
    `case` over SLURM_ARRAY_TASK_ID). One submission, one queue entry per run, and each
    task's output file is its own (`output` holds %A_%a)."""
    o = options or SlurmOptions()
    if not jobs:
        raise ValueError("no runs for a job array")
    if len({job.shape(o) for job in jobs}) != 1:
        raise SlurmError("the runs of one job array must ask for the same allocation")
    for job in jobs:
        _checked(job.specs, job_name, output, o)
    first = jobs[0]
    lines = ["#!/bin/bash", *_header(first.specs, first.nodes, job_name, output, first.time_s,
                                     o),
             f"#SBATCH --array=0-{len(jobs) - 1}", 'case "$SLURM_ARRAY_TASK_ID" in']
    for i, job in enumerate(jobs):
        lines += [f"{i})", *_body(job.specs, job.nodes, output, o, job.horovod), ";;"]
    lines += ['*) echo "no run for array task $SLURM_ARRAY_TASK_ID" >&2; exit 1 ;;', "esac"]
    return "\n".join(lines) + "\n"


#: Pending reasons that no amount of waiting resolves (Slurm's job_reason_codes): the
#: request does not fit the partition's configuration or limits. Such a job is cancelled
#: at once, with the reason, instead of waiting out queue_wait_s.
NEVER_STARTS = frozenset({
    "BadConstraints", "PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit",
    "InvalidAccount", "InvalidQOS", "AccountNotAllowed", "QOSNotAllowed",
    "PartitionInactive", "PartitionDown"})


#: Pending reasons that mean the nodes the job needs are busy or unusable (down, drained,
#: reserved): the nodes' own reasons (`sinfo -R`) then say what an administrator must fix.
#: (squeue spells the last with spaces or underscores, by version)
NODES_UNAVAILABLE = ("Resources", "ReqNodeNotAvail", "Nodes required for job are DOWN")


def unavailable_nodes() -> str:
    """Nodes Slurm holds down or drained, each with its reason ("node1 drained: Kill task
    failed"); "" when none, or when sinfo cannot answer (this is only an explanation)."""
    try:
        out = subprocess.run(["sinfo", "-h", "-R", "-o", "%N|%T|%E"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    found = [f"{n} {st}: {why}" for n, st, why in
             (ln.split("|", 2) for ln in out.stdout.splitlines() if ln.count("|") >= 2)]
    return "; ".join(found)


def queue_note(job_id: str, state: str, reason: str) -> str:
    """The QUEUE_MARK line for a job's new state: its pending reason, and for a job
    waiting on nodes, which nodes Slurm holds down or drained and why."""
    text = f"{QUEUE_MARK}job {job_id} {state}"
    if reason and reason != "None":
        text += f" ({reason})"
    if state == "PENDING" and reason.replace("_", " ").startswith(NODES_UNAVAILABLE):
        nodes = unavailable_nodes()
        if nodes:
            text += f"; unavailable nodes: {nodes}"
    return text


def _squeue_state(job_id: str) -> tuple[str, str]:
    """The job's state and its pending reason; ("", "") once Slurm no longer lists it.
    SlurmError when squeue cannot answer (no Slurm here, controller unreachable): a job
    must never look ended because nobody could be asked."""
    return queue_states([job_id]).get(job_id, ("", ""))


def queue_states(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """(state, pending reason) of each listed job Slurm still lists, asked with one squeue
    (array tasks one by one, `-r`): polling many submitted jobs costs the controller one
    request, not one per job. SlurmError when squeue cannot answer."""
    if not job_ids:
        return {}
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(job_ids), "-o", "%i %T %r"],
                             capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise SlurmError("squeue is not installed here: run this where Slurm's commands "
                         "are (a login node)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError("squeue gave no answer within 120 s") from None
    if out.returncode and "Invalid job id" not in out.stderr:
        raise SlurmError(f"squeue failed (exit {out.returncode}): "
                         + (out.stderr.strip().splitlines() or [""])[-1])
    if out.returncode and len(job_ids) > 1:
        # a Slurm that refuses the whole list for one id it forgot: ask one by one
        return {j: st for one in job_ids for j, st in queue_states([one]).items()}
    found = {}
    for line in out.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2:
            found[parts[0]] = (parts[1], parts[2].strip() if len(parts) > 2 else "")
    return found


@dataclass(frozen=True)
class JobState:
    """What Slurm says of a job: `active` while squeue lists it; once ended, its final
    state (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY...) and run time
    where the controller (recent jobs) or the accounting database still knows them."""

    active: bool
    state: str = ""  # "" when nothing says
    reason: str = ""
    elapsed_s: float | None = None


def _seconds(text: str) -> float | None:
    """Slurm's [D-]HH:MM:SS (or MM:SS) as seconds."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?", text.strip())
    if not m:
        return None
    d, h, mi, sec = (int(x) if x else 0 for x in m.groups())
    return float(((d * 24 + h) * 60 + mi) * 60 + sec)


def job_state(job_id: str, queued: dict[str, tuple[str, str]] | None = None) -> JobState:
    """squeue while the job is queued or running (`queued`: what one `queue_states` of
    many jobs said); then `scontrol show job` (the controller keeps ended jobs for
    MinJobAge, 5 min by default); then `sacct` (sites with accounting). Nothing found
    means the job ended and only its output file can say how."""
    state, reason = (_squeue_state(job_id) if queued is None
                     else queued.get(job_id, ("", "")))
    if state:
        return JobState(True, state, reason)
    try:
        out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
    if fields.get("JobState"):
        return JobState(False, fields["JobState"], fields.get("Reason", ""),
                        _seconds(fields.get("RunTime", "")))
    try:
        out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State,Elapsed"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    first = out.strip().splitlines()[:1]
    if first and "|" in first[0]:
        st, elapsed = first[0].split("|", 1)
        return JobState(False, st.split()[0] if st.split() else "", "", _seconds(elapsed))
    return JobState(False)


def _job_role(specs: list[ProcessSpec], default: str = "srun") -> str:
    """The role the whole job reports as: "chief" when a chief runs the timed loop and
    reports for every worker (TensorFlow's parameter-server jobs; harness/collect.py counts
    its reporters by it), else the launcher's own name."""
    return "chief" if any(s.role == "chief" for s in split_roles(specs)[0]) else default


def job_role(specs: list[ProcessSpec]) -> str:
    """The role a submitted job's result is reported under (see _job_role)."""
    return _job_role(specs, NAME)


#: how long the controller may not answer before a followed job is given up
LOST_S = 300.0
#: what slurmstepd writes into a job's output when it ends the job itself
_STEPD_END = re.compile(r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+( DUE TO TIME LIMIT)?")


def result_from_output(lines: list[str], role: str, script: str, elapsed: float,
                       timed_out: bool = False, interrupted: bool = False) -> JobResult:
    """A job's result from its output file: the exit status the batch script wrote last
    (none: the job was ended from outside, e.g. scancel or its time limit), as one process
    of the given role, like every launcher's JobResult."""
    codes = [int(ln[len(EXIT_MARK):]) for ln in lines if ln.startswith(EXIT_MARK)
             and ln[len(EXIT_MARK):].strip().lstrip("-").isdigit()]
    code = codes[-1] if codes else (None if timed_out else 1)
    proc = ProcessResult(ProcessSpec(role, 0, ("sbatch", script), {}), code, lines)
    return JobResult([proc], elapsed, timed_out=timed_out, interrupted=interrupted,
                     failed_tag=f"{role}0" if code != 0 else None)


def ended_by_slurm(lines: list[str], state: str = "") -> tuple[str, str] | None:
    """(status, reason) for a job Slurm ended before its script wrote an exit status:
    its time limit, a cancel, a node failure; None when the script ended by itself."""
    if any(ln.startswith(EXIT_MARK) for ln in lines):
        return None
    said = next((m for ln in lines if (m := _STEPD_END.search(ln))), None)
    if state.startswith("TIMEOUT") or (said is not None and said.group(1)):
        return "timeout", "Slurm ended the job at its time limit (timeout_s + 60 s)"
    if state.startswith("CANCELLED") or said is not None:
        return "failed", ("the job was cancelled (scancel, or an administrator) before it "
                          "finished" + ("" if lines else "; it never started: no output"))
    if state:
        return "failed", f"the job ended in Slurm state {state} without an exit status"
    return "failed", ("the job ended without an exit status and Slurm no longer knows it "
                      "(cancelled, or killed with its node)" if lines else
                      "the job ended without writing its output file (cancelled before it "
                      "started, or the output folder is not shared with the compute nodes)")


def job_in_output(lines: list[str]) -> str | None:
    """The job id a job's output file names (JOB_MARK), if it started."""
    for ln in lines[:50]:
        if ln.startswith(JOB_MARK) and ln[len(JOB_MARK):].strip():
            return ln[len(JOB_MARK):].strip()
    return None


def queued_scripts() -> dict[str, str]:
    """Batch script path -> job id (a job array's: the array's) of every job squeue
    lists: how a job whose id was never recorded is found again. SlurmError when squeue
    cannot answer."""
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%F|%o"], capture_output=True, text=True,
                             timeout=120)
    except FileNotFoundError:
        raise SlurmError("squeue is not installed here") from None
    except subprocess.TimeoutExpired:
        raise SlurmError("squeue gave no answer within 120 s") from None
    if out.returncode:
        raise SlurmError(f"squeue failed (exit {out.returncode}): "
                         + (out.stderr.strip().splitlines() or [""])[-1])
    found = {}
    for line in out.stdout.splitlines():
        jid, _, command = line.partition("|")
        if jid.strip() and command.strip():
            found[command.strip()] = jid.strip()
    return found


def submit_script(script: Path, cwd: str | None = None) -> str:
    """sbatch a written script; its job id (a job array's: the array's)."""
    try:
        sub = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True,
                             text=True, cwd=cwd, timeout=120)
    except FileNotFoundError:
        raise SlurmError("sbatch is not installed here: run the harness on a Slurm login "
                         "node (or start harness/slurm-cluster.sh)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"sbatch {script}: no answer within 120 s (is slurmctld "
                         "reachable?)") from None
    if sub.returncode:
        raise SlurmError(f"sbatch {script} failed: {sub.stderr.strip()}")
    return sub.stdout.strip().split(";")[0]


class _Follower:
    """A job's output file, read as it grows: complete lines only."""

    def __init__(self, path: Path, on_line: LineCallback | None) -> None:
        self.path, self.on_line, self.pos = path, on_line, 0
        self.lines: list[str] = []

    def note(self, line: str) -> None:
        """A line of the launcher's own (QUEUE_MARK), kept with the job's output."""
        self.lines.append(line)
        if self.on_line is not None:
            self.on_line("slurm", line)

    def drain(self) -> None:
        if not self.path.is_file():
            return
        with open(self.path, errors="replace") as fh:
            fh.seek(self.pos)
            chunk = fh.read()
        complete = chunk[:chunk.rfind("\n") + 1]
        self.pos += len(complete.encode(errors="replace"))
        for line in complete.splitlines():
            self.lines.append(line)
            if self.on_line is not None:
                self.on_line("slurm", line)


def launch(specs: list[ProcessSpec], timeout: float, on_line: LineCallback | None = None,
           on_start: StartCallback | None = None, options: SlurmOptions | None = None,
           nodes: int = 1, horovod: bool = False, job_name: str = "dnnbench") -> JobResult:
    o = options or SlurmOptions()
    if os.environ.get("SLURM_JOB_ID") and (split_roles(specs)[1]
                                           or "TF_CONFIG" in specs[0].env):
        # inside an allocation, a job with roles or per-task addresses: the batch
        # script's steps, run here
        workdir = Path(o.workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        body = sbatch_script(specs, nodes, job_name, str(workdir / f"{job_name}.out"),
                             timeout, o, horovod)
        step = ProcessSpec(_job_role(specs), 0, ("bash", "-c", body), {}, cwd=specs[0].cwd)
        return run_job([step], timeout, on_line=on_line, on_start=on_start)
    if os.environ.get("SLURM_JOB_ID"):  # inside an allocation: a job step of it
        env = {k: v for k, v in specs[0].env.items() if k not in PER_RANK}
        first = subprocess.run(["bash", "-c", FIRST_NODE_ADDR], capture_output=True,
                               text=True).stdout.strip()
        env["MASTER_ADDR"] = first or "127.0.0.1"
        step = ProcessSpec("srun", 0, tuple(srun_line(specs, nodes, o.mpi if horovod else "")),
                           env, cwd=specs[0].cwd)
        return run_job([step], timeout, on_line=on_line, on_start=on_start)
    check_fits(specs, nodes, o.partition)
    workdir = Path(o.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    output = workdir / f"{job_name}-%j.out"
    script = workdir / f"{job_name}.sbatch"
    script.write_text(sbatch_script(specs, nodes, job_name, str(output), timeout, o, horovod))
    job_id = submit_script(script, specs[0].cwd)
    out = _Follower(Path(str(output).replace("%j", job_id)), on_line)
    start = time.monotonic()
    timed_out = interrupted = False
    running_since = None
    never = ""
    unanswered = None  # since when squeue has been failing
    seen = ("", "")  # the last (state, reason) noted in the output
    try:
        while True:
            now = time.monotonic()
            try:
                state, reason = _squeue_state(job_id)
                unanswered = None
            except SlurmError:
                unanswered = unanswered or now
                if now - unanswered > LOST_S:
                    raise SlurmError(f"lost contact with Slurm for {LOST_S:.0f} s while job "
                                     f"{job_id} ran; it may still run: scancel {job_id}"
                                     ) from None
                time.sleep(5)
                continue
            if not state:
                break
            out.drain()
            if (state, reason) != seen:
                seen = (state, reason)
                out.note(queue_note(job_id, state, reason))
            if state == "PENDING" and reason in NEVER_STARTS:
                never = reason
                break
            if state == "RUNNING" and running_since is None:
                running_since = now
            # the run's limit counts from the job's start; the queue gets o.queue_wait_s
            if (running_since is not None and now - running_since > timeout) or (
                    running_since is None and now - start > o.queue_wait_s):
                timed_out = True
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if timed_out or interrupted or never:
            subprocess.run(["scancel", job_id], capture_output=True)
        time.sleep(0.2)
        out.drain()
    if never:
        raise SlurmError(f"job {job_id} can never start: Slurm holds it pending with reason "
                         f"{never}: its request does not fit the partition's configuration "
                         "or limits (https://slurm.schedmd.com/job_reason_codes.html); "
                         "cancelled")
    result = result_from_output(out.lines, _job_role(specs, NAME), str(script),
                                time.monotonic() - start, timed_out, interrupted)
    if timed_out and running_since is None:
        result.timeout_reason = (
            f"Slurm job {job_id} waited {o.queue_wait_s:g} s in the queue without starting "
            f"(last pending reason: {seen[1] or 'none given'}) and was cancelled; "
            "queue_wait_s in the experiment file's [slurm] table sets the wait")
    return result
