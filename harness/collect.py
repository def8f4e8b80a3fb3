"""Turn a finished job (its processes' event lines) into one stored RunRecord."""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

from frameworks import events
from frameworks.contract import RunSpec
from harness.stats import mad, median, median_ci
from harness.store import PHASE_COLUMNS, RunRecord
from harness.telemetry import Telemetry
from runners.spec import JobResult

#: A first trial this much slower than the rest means warm-up was too short.
SETTLING_WARN = 0.05


@dataclass(frozen=True)
class Schedule:
    """How the harness scheduled a run's trials (harness/interleave.py)."""

    order: str = "sequential"  # interleaved | sequential
    group: str = ""  # run ids measured together, comma-separated (interleaved)
    rounds: dict[int, int] = field(default_factory=dict)  # trial -> round of the group
    stopped_by: str = ""  # target width | budget | fixed trials | max trials
    timed_out: bool = False  # the harness ended it: a start-up or trial exceeded timeout_s


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def base_row(spec: RunSpec, experiment: str, run_id: str, status: str, reason: str = "",
             manifest: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"run_id": run_id, "experiment": experiment, "config_hash": spec.config_hash(),
            "status": status, "reason": reason, "framework": spec.framework,
            "model": spec.model, "strategy": spec.strategy, "mode": spec.mode,
            "device": spec.device, "precision": spec.precision,
            "batch_size": spec.batch_size, "image_size": spec.image_size,
            "workers": spec.workers, "nodes": spec.nodes, "ps": spec.ps, "label": spec.label,
            "data": spec.data or "synthetic", "link": spec.link, "env": spec.env,
            "cpus_per_host": spec.cpus_per_host,
            "ps_hosts": spec.ps_hosts if spec.ps else "",
            "ps_split_bound": spec.ps_split_bound,
            "replicate": spec.replicate,
            "loader_workers": spec.loader_workers if spec.data else None,
            "started": now_iso(), "spec_json": spec.to_json(), "manifest_json": manifest or {}}


def _looks_oom(*texts: str) -> bool:
    words = ("out of memory", "cannot allocate memory", "can't allocate memory", "memoryerror",
             "std::bad_alloc", "killed by signal 9")
    return any(w in (t or "").lower() for t in texts for w in words)


def job_events(job: JobResult) -> list[dict[str, Any]]:
    out = []
    for proc in job.processes:
        for line in proc.lines:
            ev = events.parse(line)
            if ev is not None:
                out.append(ev)
    return out


def device_columns(spec: RunSpec, evs: list[dict[str, Any]], images_per_s: float | None
                   ) -> dict[str, Any]:
    """The workers' own device peaks (frameworks/peak.py), the datasheet's figure for that
    device, and, for runs on GPUs or Slurm's compute nodes, the MFU against workers x the
    measured peak (CPU runs on this host get theirs from the harness's noise meter, which
    sees the same cores)."""
    from harness import datasheets
    from harness.noise import train_flops_per_image

    peaks = [ev for ev in evs if ev["event"] == events.PEAK and ev.get("gflops")]
    if not peaks:
        return {}
    out: dict[str, Any] = {"device_gflops": median([float(ev["gflops"]) for ev in peaks]),
                           "device_math": peaks[0].get("dtype")}
    out["datasheet_gflops"] = datasheets.peak_gflops(str(peaks[0].get("device", "")),
                                                     str(out["device_math"]))
    if (spec.device != "cpu" or spec.resolved_launcher == "slurm") and images_per_s \
            and spec.mode != "loader":
        out["mfu"] = train_flops_per_image(spec) * images_per_s / (
            out["device_gflops"] * spec.workers * 1e9)
    return out


def record(spec: RunSpec, experiment: str, run_id: str, job: JobResult,
           host: dict[str, Any], telemetry: Telemetry | None = None,
           schedule: Schedule | None = None) -> RunRecord:
    evs = job_events(job)
    manifest: dict[str, Any] = {"host": host, "ranks": {}}
    for ev in evs:
        if ev["event"] in (events.ENVIRONMENT, events.MODEL, events.DONE, events.DATA):
            manifest["ranks"].setdefault(str(ev.get("rank", 0)), {}).update(
                {k: v for k, v in ev.items() if k not in ("event", "rank")})
        elif ev["event"] == events.PEAK:
            manifest["ranks"].setdefault(str(ev.get("rank", 0)), {})["device_peak"] = {
                k: v for k, v in ev.items() if k not in ("event", "rank", "v", "t")}
    row = base_row(spec, experiment, run_id, "ok", manifest=manifest)
    if job.started is not None:  # the row is built once the job has ended
        row["started"] = dt.datetime.fromtimestamp(job.started, dt.UTC).isoformat(
            timespec="seconds")
    row["elapsed_s"] = job.elapsed
    errors = [ev["reason"] for ev in evs if ev["event"] == events.ERROR]
    done = sum(1 for ev in evs if ev["event"] == events.DONE)
    # A chief (TensorFlow's parameter-server coordinator) reports for the whole job.
    reporters = 1 if any(p.spec.role == "chief" for p in job.processes) else spec.workers
    schedule = schedule or Schedule()
    if schedule.timed_out:
        row.update(status="timeout", reason=f"no progress within timeout_s = "
                                            f"{spec.timeout_s:g} s (start-up or one trial)")
    elif job.interrupted:
        row.update(status="interrupted", reason="stopped by Ctrl-C")
    elif job.timed_out:
        row.update(status="timeout", reason=job.timeout_reason
                   or f"no result within timeout_s = {spec.timeout_s:g} s")
    elif errors or not job.ok or done < reporters:
        code = next((p.returncode for p in job.processes if p.spec.tag == job.failed_tag), None)
        reason = errors[0] if errors else (
            f"process {job.failed_tag} exited with code {code}" if job.failed_tag
            else "worker finished without reporting results")
        if code is not None and code < 0:
            reason += f" (killed by signal {-code}" + (
                ": SIGKILL, e.g. the kernel's out-of-memory killer)" if code == -9 else ")")
        row.update(status="failed", reason=reason)
    if row["status"] != "ok":
        row["output_tail"] = "\n".join(job.failure_tail(25))
        if spec.memory_limit_mb and _looks_oom(row["reason"], row["output_tail"]):
            row["reason"] = (f"out of memory under memory_limit_mb = {spec.memory_limit_mb}: "
                             f"{row['reason']}")
    trials = [ev for ev in evs if ev["event"] == events.TRIAL]
    rec = RunRecord(row)
    row.update(trial_order=schedule.order, group_id=schedule.group or None,
               stopped_by=schedule.stopped_by or None)
    times: list[float] = []
    per_trial: dict[int, float] = {}  # trial -> wall / timed iterations (rank 0)
    paired: list[float] = []
    phase_samples: dict[str, list[float]] = {}
    for tr in trials:
        rank, trial = int(tr.get("rank", 0)), int(tr["trial"])
        if tr.get("paired"):
            if rank == 0 and tr["iter_times"]:  # wall-based, like the headline (async engines)
                paired.append(float(tr["wall"]) / len(tr["iter_times"]))
            continue
        for i, t in enumerate(tr["iter_times"]):
            rec.iterations.append((rank, trial, i, float(t)))
            if rank == 0:
                times.append(float(t))
        if rank == 0 and tr["iter_times"]:
            per_trial[trial] = float(tr["wall"]) / len(tr["iter_times"])
            rec.trials.append((trial, schedule.rounds.get(trial), tr.get("started"),
                               per_trial[trial], float(tr["wall"]), len(tr["iter_times"])))
        for phase, values in (tr.get("phases") or {}).items():
            for i, t in enumerate(values):
                rec.phases.append((rank, trial, i, phase, float(t)))
                if rank == 0:
                    phase_samples.setdefault(phase, []).append(float(t))
    warm = [ev for ev in evs if ev["event"] == events.WARMUP and int(ev.get("rank", 0)) == 0]
    if warm:
        row.update(warmup_steps=warm[0].get("steps"), warmup_settled=int(bool(
            warm[0].get("settled"))))
    if per_trial:
        # Headline: per trial, wall time over its timed iterations (right for asynchronous
        # engines too: the closing synchronisation absorbs any backlog); the median over
        # trials, and its 95% interval over trials: trials are the independent units
        # (each its own turn of the machine, minutes apart when interleaved), so the
        # interval covers trial-to-trial drift, not only the jitter inside one trial.
        walls = [per_trial[k] for k in sorted(per_trial)]
        t_iter = median(walls)
        lo, hi = median_ci(walls)
        gb = spec.global_batch
        row.update(t_iter_s=t_iter, t_iter_low_s=lo if lo == lo else None,
                   t_iter_high_s=hi if hi == hi else None,
                   jitter=mad(times) / median(times) if times else None,
                   n_iters=len(times), n_trials=len(walls), images_per_s=gb / t_iter,
                   images_per_s_low=gb / hi if hi == hi else None,
                   images_per_s_high=gb / lo if lo == lo else None,
                   images_per_s_per_worker=gb / t_iter / spec.workers,
                   interval_halfwidth=(max(t_iter - lo, hi - t_iter) / t_iter
                                       if lo == lo else None))
        if paired:
            row["t_iter_paired_s"] = median(paired)
        if len(walls) > 1:
            row["settling"] = walls[0] / median(walls[1:]) - 1
        for phase, column in PHASE_COLUMNS.items():
            if phase in phase_samples:
                row[column] = median(phase_samples[phase])
    models = [ev for ev in evs if ev["event"] == events.MODEL]
    if models:
        row["parameters"] = models[0].get("parameters")
        settings = models[0].get("settings") or {}
        row["threads"] = settings.get("threads")
        compiled = settings.get("compile_s")  # {function: seconds}, adapters that know it
        if isinstance(compiled, dict) and compiled:
            row["compile_s"] = round(sum(float(v) for v in compiled.values()), 3)
    digests = {ev.get("rank", 0): ev.get("state_digest") for ev in evs
               if ev["event"] == events.DONE and ev.get("state_digest")}
    if len(digests) > 1:
        row["replicas_identical"] = int(len(set(digests.values())) == 1)
    data = [ev for ev in evs if ev["event"] == events.DATA]
    if data:
        row["corrupt_skipped"] = sum(int(ev.get("corrupt_skipped", 0)) for ev in data)
    rss = [ev["peak_rss_bytes"] for ev in evs if ev["event"] == events.DONE
           and ev.get("peak_rss_bytes")]
    if rss:
        row["peak_rss_mb"] = max(rss) / 2**20
    if telemetry is None:  # the workers' own samples, where this host could not take them
        telemetry = Telemetry.from_events(evs)
    if telemetry is not None:
        row.update({k: v for k, v in telemetry.summary().items() if v is not None})
        rec.telemetry = telemetry.rows()
        manifest["telemetry"] = {"interval_s": telemetry.interval_s, "gpu": telemetry.gpu,
                                 "samples": len(telemetry.samples)}
    row.update(device_columns(spec, evs, row.get("images_per_s")))
    losses = [v for ev in evs if ev["event"] == events.LOSS and ev.get("rank", 0) == 0
              for v in ev["values"]]
    if losses:
        row["final_loss"] = losses[-1]
    audit(spec, row["status"])
    return rec


#: A file that gets one JSON line per run this process records (its configuration and
#: status), across sweeps, benchmarks and tests: `make test` reads it to say which cells
#: of the launcher table its tests ran (tests/cells.py).
AUDIT_ENV = "DNNBENCH_RUN_LOG"


def audit(spec: RunSpec, status: str) -> None:
    path = os.environ.get(AUDIT_ENV)
    if not path:
        return
    line = json.dumps({"framework": spec.framework, "strategy": spec.strategy,
                       "launcher": spec.resolved_launcher, "env": spec.env,
                       "link": spec.link, "status": status})
    try:
        with open(path, "a") as fh:  # one short write: lines of parallel writers stay whole
            fh.write(line + "\n")
    except OSError:
        pass  # an audit line is never worth a run
