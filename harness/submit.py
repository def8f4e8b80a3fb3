"""Submit a whole sweep to Slurm at once and collect its results later.

On a shared cluster every job waits in the queue; a harness that submits one run, waits
for it and submits the next sits in a terminal for days, and a lost login session ends
the sweep. `submit_experiment` sbatches every pending run in one go (runs asking for the
same allocation become one job array), records each job in the results database's `jobs`
table and returns. `collect` later reads every ended job's output file (the source of
truth: it holds every worker event) into the same row a waited-for run gets; it is
idempotent (a job's row and its "collected" mark are one transaction) and leaves running
jobs for later. Nothing here waits on the harness being alive while jobs run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from frameworks.contract import RunSpec
from frameworks.plan import slurm_mpi
from harness import collect as collecting
from harness import jobs
from harness.experiment import Experiment
from harness.manifest import host_manifest
from harness.store import RunRecord, Store, resumed
from harness.telemetry import DEFAULT_INTERVAL_S
from runners import slurm
from runners.slurm import BatchRun, SlurmError, SlurmOptions

#: An ended job's output file changed this recently and holds no exit status yet: on a
#: shared file system the last lines may still be on their way; collect it next time.
SETTLE_S = 30.0


@dataclass
class SubmitSummary:
    jobs: list[str] = field(default_factory=list)  # sbatch submissions (array ids too)
    runs: int = 0  # runs submitted
    in_flight: int = 0  # submitted earlier and not collected yet
    stored: int = 0  # already in the database
    failed: int = 0  # refused before submission (stored as failed rows)
    skipped: int = 0


@dataclass
class CollectSummary:
    stored: dict[str, int] = field(default_factory=dict)  # status -> rows stored now
    waiting: dict[str, int] = field(default_factory=dict)  # Slurm state -> jobs left

    @property
    def left(self) -> int:
        return sum(self.waiting.values())


#: the job id of a job recorded before sbatch answered ("?", or "?_I" for array task I)
UNSUBMITTED = "?"
#: how long such a job may be looked for before it counts as never submitted
RECOVER_AFTER_S = 300.0


class SubmitError(ValueError):
    """The experiment cannot be submitted as asked; the message names the fix."""


def _job_name(exp: Experiment) -> str:
    name = f"dnnbench-{exp.name}"
    return name if slurm.JOB_NAME_RE.fullmatch(name) else "dnnbench"


def submit_experiment(exp: Experiment, store: Store, options: SlurmOptions,
                      retry_failed: bool = False, out: TextIO | None = None,
                      container_options=None) -> SubmitSummary:
    """sbatch every run of `exp` not yet stored or in flight; record the jobs; return.
    A run Slurm could never hold (check_fits) is stored as failed, as a waited-for sweep
    stores it."""
    from harness import sweep

    say = (lambda text: print(text, file=out, flush=True)) if out else (lambda text: None)
    local = sorted({p.spec.resolved_launcher for p in exp.runs if not p.skip_reason
                    and p.spec.resolved_launcher != "slurm"})
    if local:
        raise SubmitError(f"--submit sends runs to Slurm, but experiment {exp.name} has runs "
                          f"with launcher {', '.join(local)}: add --launcher slurm (or set "
                          "launcher = \"slurm\" in the file)")
    environments = sweep.check_environments(exp)
    images = sweep.check_images(exp, container_options or sweep.ContainerOptions())
    recover_unsubmitted(store, exp.name, out)  # a stopped submit's jobs: found or resent
    source_root = jobs.worker_source_root()
    host = host_manifest()
    summary = SubmitSummary()
    stored = {r["config_hash"]: r["status"] for r in store.runs(
        "WHERE experiment = ?", (exp.name,))}
    keep = resumed(retry_failed)
    flying = {j["config_hash"] for j in store.jobs(
        "WHERE experiment = ? AND collected IS NULL", (exp.name,))}
    todo: list[tuple[RunSpec, str, BatchRun]] = []
    context = None
    for planned in exp.runs:
        spec = planned.spec
        key = spec.config_hash()
        if stored.get(key) in keep:
            summary.stored += 1
            continue
        if key in flying:
            summary.in_flight += 1
            continue
        run_id = collecting.new_run_id()
        if planned.skip_reason:
            store.add(RunRecord(collecting.base_row(spec, exp.name, run_id, "skipped",
                                                    planned.skip_reason, {"host": host})))
            summary.skipped += 1
            continue
        if context is None:  # sinfo once: the compute nodes' CPUs size every run
            context = jobs.slurm_context("", source_root, run_id, options)
        procs = jobs.slurm_plan(spec, replace(context, run_id=run_id), environments, images,
                                 source_root, DEFAULT_INTERVAL_S)
        try:
            slurm.check_fits(procs, spec.nodes, options.partition)
        except SlurmError as exc:
            store.add(RunRecord(collecting.base_row(spec, exp.name, run_id, "failed",
                                                    str(exc), {"host": host})))
            summary.failed += 1
            say(f"  {sweep.describe(spec)}: failed: {exc}")
            continue
        todo.append((spec, run_id, BatchRun(procs, spec.nodes, spec.timeout_s,
                                            slurm_mpi(spec))))
    if not todo:
        return summary
    workdir = Path(options.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    name = _job_name(exp)
    groups: dict[tuple[str, ...], list[tuple[RunSpec, str, BatchRun]]] = {}
    for item in todo:
        groups.setdefault(item[2].shape(options), []).append(item)
    for members in groups.values():
        tag = members[0][1]  # the first run's id names the script: unique per submission
        script = workdir / f"{name}-{tag}.sbatch"
        # output files named by the submission, not the job id: known before sbatch answers
        if len(members) == 1:
            spec, run_id, job = members[0]
            output = str(workdir / f"{name}-{tag}.out")
            script.write_text(slurm.sbatch_script(job.specs, job.nodes, name, output,
                                                  job.time_s, options, job.horovod))
            paths = [output]
        else:
            output = str(workdir / f"{name}-{tag}-%a.out")
            script.write_text(slurm.array_script([m[2] for m in members], name, output,
                                                 options))
            paths = [output.replace("%a", str(i)) for i in range(len(members))]
        # recorded before sbatch (write-ahead): a harness stopped while sbatch answers
        # leaves rows that `collect` finds the job of again (recover_unsubmitted)
        store.add_jobs([{
            "job_id": UNSUBMITTED + (f"_{i}" if len(members) > 1 else ""),
            "experiment": exp.name,
            "config_hash": spec.config_hash(), "run_id": run_id, "output": path,
            "script": str(script), "role": slurm.job_role(job.specs),
            "submitted": collecting.now_iso(), "spec_json": spec.to_json(),
            "manifest_json": {**host, "slurm": {"script": str(script)}}}
            for i, ((spec, run_id, job), path) in enumerate(zip(members, paths))])
        try:
            job_id = slurm.submit_script(script, members[0][2].specs[0].cwd)
        except SlurmError:
            store.drop_jobs([m[1] for m in members])
            raise
        store.set_job_ids({run_id: job_id if len(members) == 1 else f"{job_id}_{i}"
                           for i, (_, run_id, _) in enumerate(members)})
        summary.jobs.append(job_id)
        summary.runs += len(members)
        say(f"  submitted job {job_id}" + (f" (array of {len(members)} runs)"
                                           if len(members) > 1 else "")
            + ": " + "; ".join(sweep.describe(m[0]) for m in members[:3])
            + (f"; and {len(members) - 3} more" if len(members) > 3 else ""))
    return summary


def _read(path: str) -> list[str]:
    try:
        return Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return []


def _elapsed(state: slurm.JobState, lines: list[str]) -> float:
    """The job's run time as Slurm knows it, else the span of its workers' events."""
    if state.elapsed_s is not None:
        return state.elapsed_s
    from frameworks import events

    stamps = [float(ev["t"]) for ln in lines if events.PREFIX in ln
              and (ev := events.parse(ln)) is not None and "t" in ev]
    return max(stamps) - min(stamps) if stamps else 0.0


def _started(lines: list[str]) -> str | None:
    """When the job's first worker event was written (the run's start; the queue wait
    before it is not part of the run)."""
    import datetime as dt

    from frameworks import events

    for ln in lines:
        ev = events.parse(ln) if events.PREFIX in ln else None
        if ev is not None and "t" in ev:
            return dt.datetime.fromtimestamp(float(ev["t"]), dt.UTC).isoformat(
                timespec="seconds")
    return None


def recover_unsubmitted(store: Store, experiment: str | None = None,
                        out: TextIO | None = None) -> int:
    """Jobs recorded before sbatch answered whose harness stopped before it learnt the id
    (kill -9, a lost session): found again by their script in the queue, or by the id
    their output file names; ones found nowhere after RECOVER_AFTER_S were never submitted
    and are forgotten, so the next `--submit` sends their runs. Returns how many were
    found or forgotten."""
    from datetime import UTC, datetime

    where, params = f"WHERE job_id LIKE '{UNSUBMITTED}%' AND collected IS NULL", ()
    if experiment:
        where, params = where + " AND experiment = ?", (experiment,)
    orphans = store.jobs(where, params)
    if not orphans:
        return 0
    queued = slurm.queued_scripts()
    found: dict[str, str] = {}
    lost = []
    for job in orphans:
        jid = queued.get(job["script"] or "")
        if jid:  # "?" becomes the job's id, "?_3" the array's task 3
            found[job["run_id"]] = jid + job["job_id"][len(UNSUBMITTED):]
            continue
        named = slurm.job_in_output(_read(job["output"]))
        if named:
            found[job["run_id"]] = named
            continue
        age = (datetime.now(UTC)
               - datetime.fromisoformat(job["submitted"])).total_seconds()
        if age > RECOVER_AFTER_S:
            lost.append(job["run_id"])
    store.set_job_ids(found)
    store.drop_jobs(lost)
    if out is not None and (found or lost):
        print(f"  recovered {len(found)} job(s) recorded before sbatch answered"
              + (f"; {len(lost)} never reached Slurm and will be submitted again by "
                 "`dnnbench run --submit`" if lost else ""), file=out, flush=True)
    return len(found) + len(lost)


def collect_one(store: Store, job: dict,
                queued: dict[str, tuple[str, str]] | None = None) -> tuple[str | None, str]:
    """Store one submitted job's row if it has ended: (the row's status, Slurm's state),
    or (None, state) while it is queued or running, or its output has not settled.
    `queued`: squeue's answer for many jobs at once (slurm.queue_states)."""
    import json

    state = slurm.job_state(job["job_id"], queued)
    if state.active:
        return None, state.state
    lines = _read(job["output"])
    ended = slurm.ended_by_slurm(lines, state.state)
    out = Path(job["output"])
    if ended is not None and state.state in ("", "COMPLETED") and out.is_file() \
            and time.time() - out.stat().st_mtime < SETTLE_S:
        return None, "ENDING"  # its last lines may not have reached this host yet
    spec = RunSpec.from_json(job["spec_json"])
    result = slurm.result_from_output(lines, job["role"] or slurm.NAME, job["script"] or "",
                                      _elapsed(state, lines),
                                      timed_out=ended is not None and ended[0] == "timeout")
    manifest = json.loads(job["manifest_json"] or "{}")
    rec = collecting.record(spec, job["experiment"], job["run_id"], result, manifest)
    if ended is not None:
        rec.row.update(status=ended[0], reason=ended[1] + f" (Slurm job {job['job_id']})")
    rec.row["started"] = _started(lines) or job["submitted"]
    store.add(rec, from_job=True)
    return rec.row["status"], state.state


def collect(store: Store, experiment: str | None = None, wait: bool = False,
            poll_s: float = 10.0, out: TextIO | None = None) -> CollectSummary:
    """Store every ended job's row; with `wait`, poll until none is left."""
    where, params = "WHERE collected IS NULL", ()
    if experiment:
        where, params = where + " AND experiment = ?", (experiment,)
    summary = CollectSummary()
    while True:
        summary.waiting = {}
        recover_unsubmitted(store, experiment, out)
        jobs = store.jobs(where, params)
        unknown = [j for j in jobs if j["job_id"].startswith(UNSUBMITTED)]
        if unknown:
            summary.waiting["UNKNOWN"] = len(unknown)
            jobs = [j for j in jobs if j not in unknown]
        queued = slurm.queue_states([j["job_id"] for j in jobs])
        for job in jobs:
            status, state = collect_one(store, job, queued)
            if status is None:
                summary.waiting[state] = summary.waiting.get(state, 0) + 1
                continue
            summary.stored[status] = summary.stored.get(status, 0) + 1
            if out is not None:
                spec = RunSpec.from_json(job["spec_json"])
                from harness.sweep import describe

                print(f"  job {job['job_id']}: {describe(spec)}: {status}", file=out,
                      flush=True)
        if not wait or not summary.left:
            return summary
        if out is not None:
            print("  waiting: " + ", ".join(f"{n} {s.lower()}" for s, n in
                                            sorted(summary.waiting.items())), file=out,
                  flush=True)
        time.sleep(poll_s)


def status(store: Store, experiment: str | None = None) -> list[dict]:
    """Per experiment with submitted jobs: how many are pending, running, ended and not
    collected, and collected (with the stored rows' statuses)."""
    where, params = "", ()
    if experiment:
        where, params = "WHERE experiment = ?", (experiment,)
    rows: dict[str, dict] = {}
    stored = {(r["experiment"], r["run_id"]): r["status"] for r in store.runs(where, params)}
    recover_unsubmitted(store, experiment)
    jobs = store.jobs(where, params)
    queued = slurm.queue_states([j["job_id"] for j in jobs if not j["collected"]
                                 and not j["job_id"].startswith(UNSUBMITTED)])
    for job in jobs:
        row = rows.setdefault(job["experiment"], {"experiment": job["experiment"],
                                                  "pending": 0, "running": 0, "ended": 0,
                                                  "collected": 0, "ok": 0, "failed": 0})
        if job["collected"]:
            row["collected"] += 1
            st = stored.get((job["experiment"], job["run_id"]), "")
            row["ok" if st == "ok" else "failed"] += st != ""
            continue
        if job["job_id"].startswith(UNSUBMITTED):  # sbatch's answer not seen yet
            row["pending"] += 1
            continue
        state = slurm.job_state(job["job_id"], queued)
        if not state.active:
            row["ended"] += 1
        elif state.state == "PENDING":
            row["pending"] += 1
        else:
            row["running"] += 1
    return list(rows.values())
