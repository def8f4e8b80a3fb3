"""Run an experiment: for each RunSpec, plan its processes, launch them, store the record.

Resumable by construction: a configuration already stored as ok (or failed, or skipped)
for this experiment is not run again unless asked (`retry_failed`), and each record is
written in one transaction, so stopping at any point keeps every finished result.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from frameworks import events, gate
from frameworks.contract import RunSpec
from frameworks.plan import slurm_mpi
from harness import bottleneck, collect, envs, interleave, jobs, noise, repeat, workmeter
from harness.experiment import Experiment
from harness.jobs import slurm_context, slurm_plan, variant_for, worker_source_root
from harness.manifest import host_manifest
from harness.progress import Progress
from harness.stats import median
from harness.store import RunRecord, Store, resumed
from harness.telemetry import DEFAULT_INTERVAL_S, Sampler
from runners import container, emulated
from runners.horovodrun import HorovodNotFound
from runners.mpirun import MpiNotFound
from runners.slurm import QUEUE_MARK, SlurmError, SlurmOptions

#: Launchers that cannot start a job at all (not installed, submission refused): the run
#: is stored as failed with the launcher's reason and the sweep goes on.
LAUNCH_ERRORS = (SlurmError, HorovodNotFound, MpiNotFound, container.ContainerError)


@dataclass(frozen=True)
class ContainerOptions:
    """How `env = "container"` runs are started: the engine (auto: podman, else docker)
    and, instead of the framework's own image, an explicit one (an Apptainer .sif)."""

    engine: str = "auto"
    image: str = ""


@dataclass
class SweepSummary:
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    reused: int = 0
    interrupted: bool = False
    signal: int = 2  # what interrupted it: SIGINT (Ctrl-C), SIGTERM or SIGHUP
    #: the experiment's stored small runs the work meter reads slow, with its reading
    #: (harness/workmeter.py): `dnnbench run --remeasure-disturbed` measures them again
    slow_cpu: list[str] = field(default_factory=list)


def _needed(specs: list, env: str) -> tuple[list[tuple[str, str]], set[tuple[str, str]]]:
    """(framework, variant) pairs the `env` ("venv" or "container") runs of `specs` need,
    sorted, and those among them that run Horovod."""
    runs = [s for s in specs if s.env == env]
    return (sorted({(s.framework, variant_for(s.device)) for s in runs}),
            {(s.framework, variant_for(s.device)) for s in runs if s.strategy == "horovod"})


def check_environments(exp: Experiment, specs: list | None = None
                       ) -> dict[tuple[str, str], envs.Env]:
    """Every environment the sweep needs (for `specs`, default: every runnable one), or
    EnvError before anything runs."""
    needed, horovod = _needed(exp.runnable if specs is None else specs, "venv")
    return {key: envs.find(*key, horovod=key in horovod) for key in needed}


def check_images(exp: Experiment, options: ContainerOptions, specs: list | None = None
                 ) -> dict[tuple[str, str], dict]:
    """Every image the sweep's container runs need (for `specs`, default: every runnable
    one: engine, tag, id), or ImageError naming the build command, before anything runs."""
    from harness import images

    needed, horovod = _needed(exp.runnable if specs is None else specs, "container")
    if not needed:
        return {}
    if options.engine in ("apptainer", "singularity"):
        engine = images.engine(options.engine)  # installed, or ImageError
        if not options.image:
            raise images.ImageError(f"{engine} runs a .sif file, not an engine's image "
                                    "store: give --container-image FILE.sif (see "
                                    "docker/README.md, Apptainer)")
    else:
        engine = images.engine(options.engine)
    out = {}
    for key in needed:
        tag = options.image or images.find(*key, engine, horovod=key in horovod)
        out[key] = {"engine": engine, "image": tag,
                    "image_id": None if options.image else images.image_id(tag, engine)}
    return out


#: Fields `describe` always shows in its own words.
_DESCRIBED = {"framework", "model", "batch_size", "image_size", "mode", "strategy", "nodes",
              "devices_per_node", "ps", "link", "data", "launcher", "env", "label"}


def describe(spec) -> str:
    """One line per run for progress and logs: the usual fields in words, then every
    other field of the run's identity that differs from its default (from the field
    declarations, so two different runs never read the same)."""
    from dataclasses import fields as dc_fields

    from frameworks.contract import FIELDS

    extra = "".join(f" {f.name}={getattr(spec, f.name)}" for f in dc_fields(spec)
                    if f.name not in _DESCRIBED and FIELDS[f.name].identity
                    and getattr(spec, f.name) != f.default
                    and f.name not in ("steps", "warmup", "trials"))
    return (f"{spec.framework} {spec.model} b{spec.batch_size} {spec.image_size}px "
            f"{spec.mode} {spec.strategy} x{spec.workers}"
            + (f" ps{spec.ps}" if spec.ps else "")
            + (f" on {spec.hosts} host{'s' if spec.hosts != 1 else ''} @ {spec.link}"
               if spec.link else "")
            + (f" real data ({spec.data})" if spec.data else "")
            + (f" via {spec.launcher}" if spec.launcher not in ("auto", "local") else "")
            + (" in containers" if spec.env == "container" else "") + extra
            + (f" [{spec.label}]" if spec.label else ""))


def describe_group(specs: list) -> str:
    """An interleaved group in one line: what its members share, then what differs."""
    shared = describe(replace(specs[0], framework="*", mode="*", env="venv")).split(" ", 1)[1]
    shared = shared.replace("* ", "", 1).replace(" *", "", 1)
    differ = [", ".join(dict.fromkeys(getattr(s, k) for s in specs))
              for k in ("framework", "mode", "env") if len({getattr(s, k) for s in specs}) > 1]
    return f"{shared}: {len(specs)} configurations ({' x '.join(differ)}), interleaved"


def write_sbatch_scripts(exp: Experiment, directory: str,
                         slurm_options: SlurmOptions | None = None,
                         container_options: ContainerOptions | None = None) -> list[Path]:
    """`--dry-run`: the batch script every runnable Slurm run would submit, nothing run."""
    from runners.slurm import sbatch_script

    environments = check_environments(exp)
    images = check_images(exp, container_options or ContainerOptions())
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    source_root = worker_source_root()
    ctx = slurm_context(sys.executable, source_root, "", slurm_options)
    written = []
    for spec in exp.runnable:
        name = f"dnnbench-{exp.name}-{spec.config_hash()}"
        procs = slurm_plan(spec, replace(ctx, run_id=name), environments, images,
                           source_root, DEFAULT_INTERVAL_S)
        path = out_dir / f"{name}.sbatch"
        path.write_text(sbatch_script(procs, spec.nodes, name, str(out_dir / f"{name}-%j.out"),
                                      spec.timeout_s, slurm_options,
                                      slurm_mpi(spec)))
        written.append(path)
    return written



GATE_PREFIX = "dnnbench-gate-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def gate_dir() -> Iterator[str]:
    """The sweep's gate files (whose trial is next), in a temporary folder named after this
    process: a harness killed with SIGKILL cannot remove its own, so each sweep first
    removes those whose process is gone."""
    for old in Path(tempfile.gettempdir()).glob(f"{GATE_PREFIX}*-*"):
        pid = old.name[len(GATE_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f"{GATE_PREFIX}{os.getpid()}-") as gates:
        yield gates


def run_experiment(exp: Experiment, store: Store, retry_failed: bool = False,
                   remeasure_disturbed: bool = False,
                   stream_output: bool = False, out: TextIO | None = None,
                   telemetry_interval_s: float = DEFAULT_INTERVAL_S,
                   slurm_options: SlurmOptions | None = None,
                   container_options: ContainerOptions | None = None) -> SweepSummary:
    """Run every planned configuration not yet stored; progress goes to `out` (stdout):
    live on a terminal, plain lines otherwise. Configurations compared with each other are
    measured together in interleaved trials (harness/interleave.py). Resource telemetry is
    sampled every `telemetry_interval_s` (0: off)."""
    stored = store.runs("WHERE experiment = ?", (exp.name,))
    done = {r["config_hash"]: r["status"] for r in stored}
    probed, slow = _suspects(stored)
    disturbed = {**probed, **slow}
    keep = resumed(retry_failed)
    summary = SweepSummary()
    todo = [p for p in exp.runs if done.get(p.spec.config_hash()) not in keep
            or (remeasure_disturbed and p.spec.config_hash() in disturbed)]
    summary.reused = len(exp.runs) - len(todo)
    # only what is left to measure needs its environment or image: a sweep that is all
    # stored already (a report, a bench rerun) runs on a machine without them
    runnable = {s.config_hash() for s in exp.runnable}
    pending = [p.spec for p in todo if p.spec.config_hash() in runnable]
    environments = check_environments(exp, pending)
    images = check_images(exp, container_options or ContainerOptions(), pending)
    prog = Progress(len(todo), stream=out)
    if summary.reused:
        failed = sum(1 for p in exp.runs if done.get(p.spec.config_hash()) in ("failed",
                                                                              "timeout"))
        hint = (f" ({failed} of them failed: add --retry-failed to measure them again)"
                if failed and not retry_failed else "")
        if disturbed and not remeasure_disturbed:
            said = ([f"{len(probed)} measured while the machine was disturbed"] if probed
                    else []) + ([f"{len(slow)} small on a slow CPU (the work meter)"]
                                if slow else [])
            hint += f" ({', '.join(said)}: add --remeasure-disturbed to measure them again)"
        prog.note(f"resuming {exp.name}: {summary.reused} of {len(exp.runs)} runs already "
                  f"stored{hint}, {len(todo)} to go")
    ctx = _SweepContext(exp, store, environments, images, slurm_options, stream_output,
                        telemetry_interval_s, prog, summary)
    ctx.replaces = disturbed if remeasure_disturbed else {}
    index = 0
    try:
        with gate_dir() as gates:
            ctx.gates = Path(gates)
            for group in interleave.groups(todo):
                ctx.run_group(group, index)
                index += len(group)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (harness/cli.py)
        summary.interrupted = True
        if exc.args and isinstance(exc.args[0], int):
            summary.signal = exc.args[0]
        prog.end("interrupted; every finished run is stored, rerun the same command to "
                 "resume", measured=False, runs=0)
    finally:
        if ctx.used_cluster:  # a cluster this sweep created goes away with it, once unused
            emulated.release(take_down=ctx.made_cluster)
    rows = [r for r in store.runs("WHERE experiment = ?", (exp.name,)) if r["status"] == "ok"]
    ratio = workmeter.slow_small(rows)
    summary.slow_cpu = sorted(
        f"{describe(RunSpec.from_json(r['spec_json']))} {ratio[r['run_id']]:.2f}x"
        for r in rows if r["run_id"] in ratio)
    return summary


def _suspects(stored: list[dict]) -> tuple[dict[str, str], dict[str, str]]:
    """config_hash -> run_id of the ok runs to measure again: those the probes read
    disturbed (harness/noise.py), and the other small ones the work meter reads slow
    (harness/workmeter.py), which the probes do not see."""
    ok = [r for r in stored if r["status"] == "ok"]
    slow = workmeter.slow_small(ok)
    probed = {r["config_hash"]: r["run_id"] for r in ok if noise.state(r) == "disturbed"}
    return probed, {r["config_hash"]: r["run_id"] for r in ok
                    if r["run_id"] in slow and r["config_hash"] not in probed}


class _SweepContext:
    """One sweep's shared state: what every group needs to start and store its runs."""

    def __init__(self, exp: Experiment, store: Store, environments, images, slurm_options,
                 stream_output: bool, telemetry_interval_s: float, prog: Progress,
                 summary: SweepSummary) -> None:
        self.exp, self.store, self.environments, self.images = exp, store, environments, images
        self.slurm_options, self.stream_output = slurm_options, stream_output
        self.telemetry_interval_s, self.prog, self.summary = telemetry_interval_s, prog, summary
        self.source_root = worker_source_root()
        self.host = host_manifest()
        self.meter = noise.Meter()
        self.sweep_id = collect.new_run_id()  # this invocation, in the host's history
        self.made_cluster = self.used_cluster = False
        self.gates = Path(tempfile.gettempdir())
        #: config_hash -> run_id of a disturbed ok row that a new measurement replaces
        self.replaces: dict[str, str] = {}

    def _record_now(self, spec, status: str, reason: str, host: dict) -> None:
        self.store.add(RunRecord(collect.base_row(spec, self.exp.name, collect.new_run_id(),
                                                  status, reason, {"host": host})))

    def run_group(self, group: list, index: int) -> None:
        prog, summary = self.prog, self.summary
        members: list[interleave.Member] = []
        for planned in group:
            spec = planned.spec
            if (spec.config_hash() not in self.replaces
                    and self.store.finished(self.exp.name, spec.config_hash())):  # another sweep
                summary.reused += 1
                prog.note(f"  {describe(spec)}: already stored by another sweep on this "
                          "database")
                prog.skip_run()
            elif planned.skip_reason:
                self._record_now(spec, "skipped", planned.skip_reason, self.host)
                summary.skipped += 1
                prog.note(f"  {describe(spec)}: skipped: {planned.skip_reason}")
                prog.skip_run()
            else:
                members.append(planned)
        if not members:
            return
        first = members[0].spec
        cluster = None
        if first.link:  # one emulated host per node, joined by a link of this rate
            try:
                cluster, made = emulated.ensure(first.hosts, first.link, first.cpus_per_host)
            except emulated.ClusterError as exc:
                for planned in members:
                    self._record_now(planned.spec, "failed", str(exc), self.host)
                    summary.failed += 1
                    prog.note(f"  {describe(planned.spec)}: failed: {exc}")
                    prog.skip_run()
                return
            self.made_cluster, self.used_cluster = self.made_cluster or made, True
        built = [self._member(planned.spec, cluster) for planned in members]
        head = describe(first) if len(built) == 1 else describe_group([m.spec for m, _ in built])
        prog.start(index + 1, head, runs=len(built))
        group = interleave.Group([m for m, _ in built], self.meter,
                                 on_round=lambda rnd, ms: prog.trial(
                                     rnd + 1, None, sum(1 for m in ms if not m.stopped_by)))
        try:
            group.run()
        except KeyboardInterrupt:
            self._store_finished([b for b in built if b[0].job is not None
                                  and b[0].job.ok], cluster, quiet=True)
            raise
        lines = self._store_finished(built, cluster)
        if len(built) == 1:
            prog.end(lines[0].strip().split(": ", 1)[-1], runs=1)
            return
        for line in lines:
            prog.note(line)
        prog.end(f"{len(built)} runs measured", runs=len(built))

    def _member(self, spec, cluster) -> tuple[interleave.Member, dict]:
        key = (spec.framework, variant_for(spec.device))
        image = self.images[key] if spec.env == "container" else None
        python = self.environments[key].python if image is None else container.IMAGE_PYTHON
        run_host = self.host if image is None else {**self.host, "container": image}
        run_id = collect.new_run_id()
        gated = spec.resolved_launcher != "slurm"  # Slurm runs one at a time, ungated
        gate_path = self.gates / run_id if gated else None
        job = jobs.for_run(spec, python, self.source_root, run_id, cluster,
                           self.slurm_options, image,
                           (gate.ENV, str(gate_path)) if gate_path is not None else None,
                           self.telemetry_interval_s)
        procs, launcher, options = job.procs, job.launcher, job.options
        sampler = (Sampler(self.telemetry_interval_s, launcher_ranks=spec.workers,
                           host_of_netns=emulated.namespace_ids(cluster) if cluster else None)
                   if self.telemetry_interval_s > 0 and launcher != "slurm" else None)
        prog, stream = self.prog, self.stream_output
        waited = []  # a Slurm job's queue notes shown so far: its start is shown after them

        def on_line(tag: str, line: str, sampler=sampler) -> None:
            if stream:
                print(f"  [{tag}] {line}", file=sys.stderr)
            if line.startswith(QUEUE_MARK):
                # a job that waits says why (a busy or drained node, its priority), and
                # when it starts; one that starts at once shows nothing
                note = line[len(QUEUE_MARK):]
                if " PENDING (" in note or waited:
                    waited.append(note)
                    prog.note(f"  {note}")
                return
            ev = events.parse(line) if events.PREFIX in line else None
            if ev is None:
                return
            if sampler is not None and ev["event"] == events.MODEL:
                sampler.measuring()  # start-up (imports, model build) is over
            if (not gated and ev["event"] == events.TRIAL and int(ev.get("rank", 0)) == 0
                    and "paired" not in ev):
                prog.trial(ev["trial"] + 1, spec.trials)

        reporters = 1 if any(p.role == "chief" for p in procs) else spec.workers
        counter = ((lambda: emulated.link_counters(cluster.hosts))
                   if cluster is not None else None)
        member = interleave.Member(spec, run_id, procs, launcher, options, reporters, sampler,
                                   on_line, gate_path, counter)
        return member, run_host

    def _store_finished(self, built: list, cluster, quiet: bool = False) -> list[str]:
        """Store every member's record; one progress line per member."""
        lines = []
        for m, run_host in built:
            spec = m.spec
            if m.launch_error is not None:
                if not isinstance(m.launch_error, LAUNCH_ERRORS):
                    raise m.launch_error
                self._record_now(spec, "failed", str(m.launch_error), run_host)
                self.summary.failed += 1
                lines.append(f"  {describe(spec)}: failed: {m.launch_error}")
                continue
            if m.job is None:
                continue
            if cluster is not None:
                run_host = {**run_host, "emulated": {
                    "link": cluster.link, "hosts": dict(zip(cluster.hosts, cluster.addresses)),
                    "bytes": m.bytes_moved, "cpus_per_host": cluster.cpus_per_host,
                    "cpusets": dict(zip(cluster.hosts, cluster.cpusets)),
                    "isolation": cluster.isolation}}
            samples = m.sampler.data if m.sampler is not None else None
            rec = collect.record(spec, self.exp.name, m.run_id, m.job, run_host, samples,
                                 schedule=collect.Schedule(
                                     order="interleaved" if m.gated else "sequential",
                                     group=",".join(sorted(x.run_id for x, _ in built)),
                                     rounds={t.trial: t.round for t in m.trials},
                                     stopped_by=m.stopped_by, timed_out=m.timed_out))
            row = rec.row
            if m.probes:
                row.update(self.meter.columns(m.probes, spec, row.get("images_per_s")))
            if m.others_cores:
                row["group_idle_cores"] = median(m.others_cores)
            if not self.store.add(rec, replaces=self.replaces.get(spec.config_hash())):
                self.summary.reused += 1
                lines.append(f"  {describe(spec)}: not stored: another sweep on this database "
                             f"stored this configuration while it ran ({row['status']} here)")
                continue
            if spec.resolved_launcher != "slurm":  # compute nodes' numbers, not this host's
                repeat.record_sweep([row], self.sweep_id)
            text = self._result_text(row)
            if not quiet:
                lines.append(f"  {describe(spec)}: {text}")
        return lines or ["nothing measured"]

    def _result_text(self, row: dict) -> str:
        if row["status"] != "ok":
            self.summary.failed += 1
            return f"{row['status']}: {row['reason']}"
        self.summary.ok += 1
        ci = (f" [{row['images_per_s_low']:.1f}, {row['images_per_s_high']:.1f}]"
              if row.get("images_per_s_low") else " (no interval: under 6 trials)")
        return (f"{row['images_per_s']:.1f} images/s{ci}, t_iter {row['t_iter_s'] * 1e3:.1f} ms"
                f", {row['n_trials']} trials ({row['stopped_by']})"
                + (f", MFU {row['mfu']:.0%}" if row.get("mfu") else "")
                + _noise_text(row) + _neighbours_text(row) + _bound_text(row)
                + ("; warm-up did not settle" if row.get("warmup_settled") == 0 else ""))


def _noise_text(row: dict) -> str:
    state = noise.state(row)
    if not state:
        return ""
    probe = f"probe at {row['noise_ratio']:.0%} of the sweep's usual best"
    if state == "disturbed":
        return f"; machine disturbed: {probe}"
    return (f"; {probe} while the sweep's own idle workers used "
            f"{row['noise_own_share']:.0%} of the cores (their load, not a disturbance)")


def _bound_text(row: dict) -> str:
    """Across emulated hosts: what bound the step (harness/bottleneck.py)."""
    b = bottleneck.check(row)
    return f"; {b.text}" if b is not None else ""


def _neighbours_text(row: dict) -> str:
    taken = noise.neighbours(row)
    if taken is None:
        return ""
    return (f"; the group's idle members took {taken[0]:.2f} of its {taken[1]:g} cores "
            "during its trials")
