"""The analysis layer: every table and finding the report shows, built once from the
results DB.

HTML, Markdown and CSV (reports/render.py) all render these same Table objects, and the
CLI and the Python API call the same functions (baselines and efficiencies in
harness/scaling.py, verdicts in harness/verdicts.py), so a number in the Markdown, a CSV
or a terminal is exactly the number on the page. Each column carries its unit; reports/
only renders.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from frameworks.contract import PS_STRATEGIES, SUPPORT
from frameworks.plan import layout_note, ps_layout
from harness import noise, repeat, verdicts, workmeter
from harness.commbench import fit as comm_fit
from harness.perfmodel import validate
from harness.perfmodel.placement import place
from harness.scaling import points, synthetic
from harness.store import PHASE_COLUMNS, Store
from models.cost import cost

PHASES = list(PHASE_COLUMNS)


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    unit: str = ""
    digits: int = 3  # significant digits for floats; 0 = text


@dataclass
class Table:
    name: str  # also the CSV file name
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def __bool__(self) -> bool:
        return bool(self.rows)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if digits == 0:
            return f"{value:g}"
        return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}" if digits else str(value)
    return str(value)


def display(fw: str) -> str:
    return SUPPORT[fw].display if fw in SUPPORT else fw


def env_of(r: dict) -> str:
    return r.get("env") or "venv"  # rows stored before the env axis ran in venvs


def config(r: dict, with_env: bool = True, with_nodes: bool = True) -> str:
    """A configuration in words; without the node count it names a scaling curve."""
    return (f"b{r['batch_size']} {r['image_size']}px {r['device']} {r['precision']}"
            + ("" if synthetic(r) else " real data")
            + ((f" {r['nodes']} hosts" if with_nodes else " hosts") + f" @ {r['link']}"
               if r.get("link") else "")
            + (f", {r['cpus_per_host']:g} CPU/host" if r.get("cpus_per_host") else "")
            + layout_note(ps_layout(r))
            + (f", arrays >= {r['ps_split_bound']} split" if r.get("ps_split_bound") else "")
            + (" in containers" if with_env and env_of(r) == "container" else ""))


def environments(ok: list[dict], rounds: dict[str, dict[int, float]] | None = None) -> Table:
    """The same configuration run in the framework's venv and in its container image:
    a container should cost nothing measurable (same code, same libraries, host network).
    Judged by `verdicts.compare_pair`, as the report's findings are: paired over the rounds
    of an interleaved group, else from the two runs' intervals."""
    t = Table("environments", "Venv vs container: the same runs in both environments", [
        Column("framework", "framework", digits=0), Column("model", "model", digits=0),
        Column("strategy", "strategy", digits=0), Column("workers", "workers"),
        Column("config", "config", digits=0), Column("venv", "venv", "images/s"),
        Column("container", "container", "images/s"),
        Column("diff_pct", "container vs venv", "%", 2),
        Column("interval", "95% interval", digits=0),
        Column("verdict", "verdict", digits=0)],
        note="Latest ok run of each configuration in each environment (mode throughput). "
             "'within noise' when the 95% interval of the difference includes zero: paired "
             "over interleaved rounds where both were measured together, else from the two "
             "runs' own intervals. Containers run with host "
             "networking and IPC and the venv's exact requirement files (docker/Dockerfile); "
             "what can differ is the Python build and system libraries of the base image "
             "(the run's manifest records both).")
    latest: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in ok:
        if r["mode"] == "throughput":
            key = (r["framework"], r["model"], r["strategy"], r["workers"], config(r, False))
            latest[key][env_of(r)] = r
    for key, by_env in sorted(latest.items()):
        venv, ctr = by_env.get("venv"), by_env.get("container")
        if not venv or not ctr:
            continue
        v = verdicts.compare_pair(ctr, venv, rounds or {})
        diff = (ctr["images_per_s"] / venv["images_per_s"] - 1) * 100
        t.rows.append({"framework": display(key[0]), "model": key[1], "strategy": key[2],
                       "workers": key[3], "config": key[4], "venv": venv["images_per_s"],
                       "container": ctr["images_per_s"], "diff_pct": diff,
                       "interval": v.interval_text(),
                       "verdict": "container slower" if v.confident and diff < 0 else
                       "container faster" if v.confident else "within noise"})
    return t


def peak_text(r: dict) -> str:
    """What a run's MFU divides by, in words."""
    if r.get("device") != "cpu" and r.get("device_gflops"):
        sheet = r.get("datasheet_gflops")
        return (f"{r['device_gflops'] / 1e3:.1f} TFLOP/s {r.get('device_math') or ''} measured"
                + (f" (datasheet {sheet / 1e3:.1f})" if sheet else " (no datasheet figure)"))
    if r.get("mfu") is not None and (r.get("peak_gflops") or r.get("machine_gflops")):
        return f"{r.get('peak_gflops') or r['machine_gflops']:.0f} GFLOP/s fp32 GEMM (host peak)"
    return ""


def shootout(ok: list[dict], drifts: dict[str, repeat.Drift | None] | None = None) -> Table:
    """`drifts` (host -> between-sweep drift, harness/repeat.py) adds the repeat interval:
    what a user would get measuring again another time on this host."""
    drifts = drifts or {}
    t = Table("shootout", "Single-device throughput", [
        Column("framework", "framework", digits=0), Column("model", "model", digits=0),
        Column("config", "config", digits=0), Column("images_per_s", "throughput", "images/s"),
        Column("repeat_low", "repeat 95% low", "images/s"),
        Column("repeat_high", "repeat 95% high", "images/s"),
        Column("low", "this sweep 95% low", "images/s"),
        Column("high", "this sweep 95% high", "images/s"),
        Column("t_iter_ms", "t_iter", "ms"), Column("n_trials", "trials", digits=0),
        Column("stopped_by", "sampling stopped by", digits=0),
        Column("jitter_pct", "jitter", "%", 2),
        Column("settling_pct", "settling", "%", 2), Column("mfu_pct", "MFU", "%", 1),
        Column("peak", "MFU against", digits=0),
        Column("compile_s", "compile", "s", 1),
        Column("noise_pct", "machine", "%", 2), Column("disturbed", "", digits=0)],
        note="Throughput and its 95% intervals. This sweep: the median over trials of each "
             "trial's wall time per iteration, and the order-statistic interval of that "
             "median over the trials (each trial one turn of the machine; compared "
             "configurations took turns trial by trial): it covers the minutes the sweep "
             "took. Repeat: that interval widened by how far this host moves between sweeps "
             "(harness/repeat.py: estimated from earlier sweeps in the host history, never "
             "from this one; '-' until the host has two other sweeps of some configuration): what "
             "measuring again another day would give; compare absolute numbers across "
             "sweeps with it. No interval ('-'): fewer than 6 trials. Sampling stopped by: "
             "target width (the interval reached +-target_width), budget (budget_s spent "
             "first) or fixed trials. Settling: first trial over the rest. MFU: training "
             "FLOPs per image (cost model: 3 x forward, 2 FLOPs per MAC) x images/s over the "
             "peak in 'MFU against': on CPU the host's fp32 GEMM peak (the best of the noise "
             "meter's probes around the run and one GEMM with the BLAS free to pick its "
             "kernels for this CPU); on GPUs the dense-matmul peak each worker measured "
             "on its own device in the run's math mode, x workers, with the vendor's "
             "datasheet figure next to it. Compile: "
             "seconds spent compiling the step before the first trial, never timed (JAX; "
             "'-' where a framework compiles lazily). Machine: "
             "the noise meter's median probe around the run's trials against "
             "the sweep's usual best (90th percentile of its probes); below 85% the run "
             "was taken while something else used the machine: its row says so, and it "
             "deserves a repeat.")
    for r in ok:
        if r["mode"] == "throughput" and r["workers"] == 1 and synthetic(r):
            ratio = r.get("noise_ratio")
            rep = repeat.interval(r, drifts.get(repeat.host_key(r)))
            t.rows.append({"framework": display(r["framework"]), "model": r["model"],
                           "config": config(r),
                           "images_per_s": r["images_per_s"],
                           "low": r["images_per_s_low"], "high": r["images_per_s_high"],
                           "repeat_low": rep[0] if rep else None,
                           "repeat_high": rep[1] if rep else None,
                           "t_iter_ms": r["t_iter_s"] * 1e3,
                           "n_trials": r.get("n_trials"),
                           "stopped_by": r.get("stopped_by") or "",
                           "jitter_pct": (r["jitter"] or 0) * 100,
                           "settling_pct": None if r["settling"] is None else r["settling"] * 100,
                           "mfu_pct": None if r.get("mfu") is None else r["mfu"] * 100,
                           "peak": peak_text(r),
                           "compile_s": r.get("compile_s"),
                           "noise_pct": None if ratio is None else ratio * 100,
                           "disturbed": noise.describe(r),
                           "_row": r})
    return t


def breakdown(ok: list[dict]) -> Table:
    cols = [Column("framework", "framework", digits=0), Column("model", "model", digits=0),
            Column("config", "config", digits=0), Column("workers", "workers")]
    cols += [Column(p, p, "ms") for p in PHASES]
    cols += [Column("sum", "sum", "ms"), Column("paired", "throughput-mode t_iter", "ms"),
             Column("overhead_pct", "breakdown overhead", "%", 2)]
    t = Table("breakdown", "Time per iteration by phase (breakdown mode)", cols,
              note="Each phase is timed with a device synchronisation after it; synthetic data "
                   "is resident on the device, so io and h2d are ~0. The throughput-mode "
                   "iteration is measured in the same process, alternating with the breakdown "
                   "trials.")
    for r in ok:
        if r["mode"] != "breakdown":
            continue
        row = {"framework": display(r["framework"]), "model": r["model"], "config": config(r),
               "workers": r["workers"], "sum": r["t_iter_s"] * 1e3,
               "paired": (r["t_iter_paired_s"] or 0) * 1e3 or None}
        for p in PHASES:
            row[p] = (r[PHASE_COLUMNS[p]] or 0.0) * 1e3
        row["overhead_pct"] = (r["t_iter_s"] / r["t_iter_paired_s"] - 1) * 100 \
            if r["t_iter_paired_s"] else None
        t.rows.append(row)
    return t


def _same_input(a: dict, b: dict) -> bool:
    return env_of(a) == env_of(b) and all(a[k] == b[k] for k in (
        "framework", "model", "batch_size", "image_size", "device", "workers"))


def pipeline(ok: list[dict]) -> Table:
    """Real data vs synthetic vs the loader's own ceiling, per configuration."""
    t = Table("pipeline", "Input pipeline: real data vs synthetic, and the loader's ceiling", [
        Column("framework", "framework", digits=0), Column("model", "model", digits=0),
        Column("config", "config", digits=0), Column("loader_workers", "loader workers"),
        Column("synthetic", "synthetic", "images/s"), Column("real", "real data", "images/s"),
        Column("cost_pct", "real-data cost", "%", 2),
        Column("loader", "loader alone", "images/s"), Column("t_io_ms", "t_io", "ms"),
        Column("t_h2d_ms", "t_h2d", "ms"), Column("bound", "verdict", digits=0)],
        note="Loader alone: the pipeline with no training (mode loader), the most images/s "
             "it can feed. Input-bound when that ceiling is below the synthetic-data training "
             "rate (faster compute would not help), compute-bound otherwise. t_io (waiting for "
             "the next batch) and t_h2d come from real-data breakdown runs. On a CPU host the "
             "loader's processes share the cores with training, so the real-data rate can fall "
             "below both.")
    keys: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in ok:
        if synthetic(r):
            continue
        key = (r["framework"], r["model"], r["batch_size"], r["image_size"], r["device"],
               r["workers"], r["data"], r.get("loader_workers"))
        keys[key][r["mode"]] = r  # the latest run of each mode wins
    for key, by_mode in keys.items():
        any_row = next(iter(by_mode.values()))
        synth = next((s for s in reversed(ok) if synthetic(s) and s["mode"] == "throughput"
                      and _same_input(s, any_row)), None)
        real, load, bd = by_mode.get("throughput"), by_mode.get("loader"), \
            by_mode.get("breakdown")
        s_ips = synth["images_per_s"] if synth else None
        l_ips = load["images_per_s"] if load else None
        bound = None
        if s_ips and l_ips:
            bound = "input-bound" if l_ips < s_ips else "compute-bound"
        t.rows.append({
            "framework": display(key[0]), "model": key[1], "config": config(any_row),
            "loader_workers": key[7], "synthetic": s_ips,
            "real": real["images_per_s"] if real else None,
            "cost_pct": (1 - real["images_per_s"] / s_ips) * 100 if real and s_ips else None,
            "loader": l_ips, "t_io_ms": (bd["t_io_s"] or 0) * 1e3 if bd else None,
            "t_h2d_ms": (bd["t_h2d_s"] or 0) * 1e3 if bd else None, "bound": bound})
    return t


def resources(ok: list[dict]) -> Table:
    t = Table("resources", "Resources: memory and CPU per worker (GPU when present)", [
        Column("framework", "framework", digits=0), Column("model", "model", digits=0),
        Column("config", "config", digits=0), Column("mode", "mode", digits=0),
        Column("strategy", "strategy", digits=0), Column("workers", "workers"),
        Column("peak_rss_mb", "peak RSS", "MiB"), Column("tree_pss_mb", "with loaders", "MiB"),
        Column("anon_mb", "anonymous", "MiB"),
        Column("cores", "CPU per worker", "cores"), Column("gpu_util", "GPU util", "%"),
        Column("gpu_mem_mb", "GPU memory", "MiB"), Column("gpu_power", "GPU power", "W")],
        note="Peak RSS: the kernel's high-water mark of one worker process (the largest over "
             "workers; exact). With loaders: the largest proportional set size (PSS) of the "
             "worker's whole process tree sampled while measuring (each page shared with "
             "forked loader processes counted once; sampled every few seconds, so a lower "
             "bound of the true peak); runs stored before PSS was sampled show the tree's RSS "
             "there, an upper bound (shared pages counted in each process). Anonymous: the "
             "tree's heap and tensors at the same scans, no file's pages: RSS and PSS also "
             "count the framework libraries' mapped pages, and how many of those a process "
             "maps moves with how the file entered the page cache (78 MiB per MXNet process "
             "on one machine; python -m bench.page_cache_rss), so compare machines by this "
             "column (empty for runs stored before 2026-12-07). CPU: "
             "mean cores busy per worker tree. GPU columns come from NVML on GPU hosts.")
    for r in ok:
        if r.get("peak_rss_mb") is None and r.get("cpu_cores_per_worker") is None:
            continue
        t.rows.append({"framework": display(r["framework"]), "model": r["model"],
                       "config": config(r), "mode": r["mode"], "strategy": r["strategy"],
                       "workers": r["workers"], "peak_rss_mb": r.get("peak_rss_mb"),
                       "tree_pss_mb": (r.get("tree_pss_peak_mb")
                                       if r.get("tree_pss_peak_mb") is not None
                                       else r.get("tree_rss_peak_mb")),
                       "anon_mb": r.get("tree_anon_peak_mb"),
                       "cores": r.get("cpu_cores_per_worker"),
                       "gpu_util": r.get("gpu_util_pct"), "gpu_mem_mb": r.get("gpu_mem_peak_mb"),
                       "gpu_power": r.get("gpu_power_w")})
    return t


def scaling(ok: list[dict], checks: list[validate.Check]) -> Table:
    t = Table("scaling", "Scaling: throughput and efficiency vs workers", [
        Column("framework", "framework", digits=0), Column("model", "model", digits=0),
        Column("strategy", "strategy", digits=0), Column("config", "config", digits=0),
        Column("workers", "workers"), Column("nodes", "nodes"),
        Column("images_per_s", "throughput", "images/s"),
        Column("per_worker", "per worker", "images/s"),
        Column("efficiency_pct", "efficiency", "%", 3),
        Column("exposed_ms", "exposed comm", "ms"), Column("t_comm_ms", "comm (no overlap)", "ms"),
        Column("predicted_eff_pct", "model efficiency", "%", 3),
        Column("bound", "bound by", digits=0), Column("machine", "machine", digits=0)],
        note="Weak scaling: per-worker batch fixed; efficiency = throughput(N) / (N x "
             "throughput(1)) against a 1-worker run with the same threads per worker; exposed "
             "communication = t_iter(N) - t_iter(1); comm (no overlap) from the breakdown run. "
             "Machine: the noise probe's verdict (own load: the sweep's own idle workers, "
             "such as Horovod's negotiation, loaded the probe) and the cores the group's idle "
             "members took during the run's trials, where above 10% of its own. Bound by: "
             "across emulated hosts, the busiest host's CPU over its quota and its wire over "
             "the link's rate, measured (the table 'What bound the step'). Slow CPU: the "
             f"work meter (harness/workmeter.py): a run with <= {workmeter.SMALL_WORKERS} "
             "parameter-server workers whose workers spent more than "
             f"{workmeter.SLOW:.1f}x their workload's usual CPU per step in the sweep did "
             "the same work on a slow CPU, which the probe does not see, and where that "
             "run is the 1-worker baseline every efficiency of its curve is too high "
             "(dnnbench run --remeasure-disturbed measures it again).")
    pred = {c.run_id: c for c in checks}
    slow = workmeter.slow_small(ok)
    comm = {}
    for r in ok:
        if r["mode"] == "breakdown" and r["workers"] > 1:
            comm[(r["framework"], r["model"], r["batch_size"], r["image_size"], r["strategy"],
                  r["workers"])] = r["t_comm_s"]
    for p in points(ok):
        r, base, eff = p["_row"], p["_base"], p["efficiency"]
        c = pred.get(r["run_id"])
        t.rows.append({
            "framework": display(r["framework"]), "model": r["model"], "strategy": r["strategy"],
            "config": config(r, with_nodes=False), "workers": r["workers"], "nodes": r["nodes"],
            "images_per_s": r["images_per_s"], "per_worker": r["images_per_s_per_worker"],
            "efficiency_pct": eff * 100 if eff else None,
            "exposed_ms": p["exposed_s"] * 1e3 if base else None,
            "t_comm_ms": (comm.get((r["framework"], r["model"], r["batch_size"],
                                    r["image_size"], r["strategy"], r["workers"])) or 0) * 1e3
            or None,
            "predicted_eff_pct": c.predicted_eff * 100 if c and c.predicted_eff else None,
            "bound": _bound(r), "machine": _machine(r, base, slow), "_row": r,
            "_base": base})
    return t


def _machine(r: dict, base: dict | None, slow: dict[str, float]) -> str:
    """The noise meter's words for a run, and the work meter's where it reads the run or
    its 1-worker baseline slow (a slow baseline moves the whole curve's efficiency)."""
    words = [noise.describe(r)]
    if r["run_id"] in slow:
        words.append(f"slow CPU (work meter {slow[r['run_id']]:.2f}x)")
    if base and base["run_id"] in slow:
        words.append(f"1-worker baseline on a slow CPU (work meter {slow[base['run_id']]:.2f}x)")
    return "; ".join(w for w in words if w)


def _bound(r: dict) -> str:
    from harness import bottleneck

    b = bottleneck.check(r)
    return "" if b is None else b.brief


def communication(store: Store) -> tuple[Table, Table]:
    rows = store.comm()
    t = Table("comm", "Communication: allreduce size sweep (commbench)", [
        Column("library", "library", digits=0), Column("ranks", "ranks"),
        Column("link", "link", digits=0), Column("bytes", "bytes"),
        Column("time_us", "time", "us"), Column("algbw", "algbw", "GB/s"),
        Column("busbw", "busbw", "GB/s"), Column("wrong", "#wrong")],
        note="algbw = bytes / time; busbw = algbw x 2(n-1)/n (nccl-tests), comparable across "
             "rank counts.")
    fits = Table("comm_fit", "Fitted latency and bandwidth (t = alpha + beta x bytes)", [
        Column("library", "library", digits=0), Column("ranks", "ranks"),
        Column("link", "link", digits=0), Column("alpha_us", "alpha", "us"),
        Column("bandwidth", "1/beta", "GB/s")])
    newest: dict[tuple, str] = {}
    for r in rows:
        newest[(r["library"], r["ranks"], r["link"])] = r["run_id"]
    keep = set(newest.values())
    for r in rows:
        if r["run_id"] in keep:
            t.rows.append({"library": r["library"], "ranks": r["ranks"], "link": r["link"],
                           "bytes": r["bytes"], "time_us": r["median_s"] * 1e6,
                           "algbw": r["algbw"] / 1e9, "busbw": r["busbw"] / 1e9,
                           "wrong": r["wrong"], "_seconds": r["median_s"]})
    for (lib, ranks, link), run_id in sorted(newest.items()):
        alpha, beta = comm_fit([r for r in rows if r["run_id"] == run_id])
        fits.rows.append({"library": lib, "ranks": ranks, "link": link,
                          "alpha_us": alpha * 1e6,
                          "bandwidth": (1 / beta / 1e9) if beta else None,
                          "_alpha": alpha, "_beta": beta})
    return t, fits


PS_COUNTS = (1, 2, 4, 8, 16, 32, 54, 64)


def ps_placement(runs: list[dict]) -> Table:
    t = Table("ps_placement", "Parameter-server load by placement policy", [
        Column("model", "model", digits=0), Column("ps", "servers"),
        Column("mean_mb", "mean", "MB"), Column("greedy_mb", "greedy busiest", "MB"),
        Column("greedy_imbalance", "greedy imbalance", "x"),
        Column("rr_mb", "round-robin busiest", "MB"),
        Column("rr_imbalance", "round-robin imbalance", "x"),
        Column("floor_mb", "largest tensor", "MB"), Column("empty", "empty servers")],
        note="Imbalance = busiest server's bytes / mean. No placement beats the largest tensor: "
             "beyond that point more servers stop helping.")
    models = sorted({(r["model"], json.loads(r["spec_json"]).get("num_classes", 1000))
                     for r in runs if r["strategy"] in PS_STRATEGIES})
    for model, classes in models:
        net = cost(model, 224, classes)
        tensors = [(x.key, x.nbytes) for x in net.tensors]
        for p in PS_COUNTS:
            g, rr = place(tensors, p, "greedy"), place(tensors, p, "round-robin")
            t.rows.append({"model": model, "ps": p, "mean_mb": g.total_bytes / p / 1e6,
                           "greedy_mb": g.max_bytes / 1e6, "greedy_imbalance": g.imbalance,
                           "rr_mb": rr.max_bytes / 1e6, "rr_imbalance": rr.imbalance,
                           "floor_mb": g.floor_bytes / 1e6, "empty": g.empty_servers})
    return t


def ps_recorded(ok: list[dict]) -> Table:
    """Placement as the framework made it (recorded by the PS run's rank 0)."""
    t = Table("ps_recorded", "Parameter placement recorded by PS runs", [
        Column("run", "run", digits=0), Column("servers", "servers"),
        Column("per_server_mb", "bytes per server", "MB", 0),
        Column("imbalance", "busiest / mean", "x"),
        Column("model_greedy", "greedy would give", "x")],
        note="Recorded per the framework's own rule (MXNet: key hash; arrays over "
             "MXNET_KVSTORE_BIGARRAY_BOUND elements split over all servers).")
    for r in ok:
        m = json.loads(r["manifest_json"] or "{}")
        placement = m.get("ranks", {}).get("0", {}).get("placement")
        if not placement:
            continue
        per: dict[int, int] = defaultdict(int)
        for _, nbytes, server in placement:
            per[server] += nbytes
        servers = max(r["ps"] or 1, len(per))
        loads = [per.get(i, 0) for i in range(servers)]
        net = cost(r["model"], 224, json.loads(r["spec_json"]).get("num_classes", 1000))
        greedy = place([(x.key, x.nbytes) for x in net.tensors], servers, "greedy")
        t.rows.append({"run": f"{display(r['framework'])} {r['model']} {r['strategy']} "
                              f"x{r['workers']} ({r['mode']})", "servers": servers,
                       "per_server_mb": ", ".join(f"{b / 1e6:.1f}" for b in loads),
                       "imbalance": max(loads) / (sum(loads) / servers),
                       "model_greedy": greedy.imbalance})
    return t


def model_accuracy(checks: list[validate.Check]) -> Table:
    t = Table("model", "Performance model: predicted vs measured iteration time", [
        Column("label", "configuration", digits=0), Column("workers", "workers"),
        Column("measured_ms", "measured", "ms"), Column("predicted_ms", "predicted", "ms"),
        Column("error_pct", "error", "%", 2), Column("measured_eff", "measured eff.", "%"),
        Column("predicted_eff", "predicted eff.", "%"),
        Column("basis", "basis and assumptions", digits=0)],
        note="t_iter = t_io + t_h2d + t_f + t_b + t_u + exposed communication.")
    for c in checks:
        t.rows.append({"label": c.label, "workers": c.workers, "measured_ms": c.measured * 1e3,
                       "predicted_ms": c.predicted * 1e3, "error_pct": c.error * 100,
                       "measured_eff": c.measured_eff * 100 if c.measured_eff else None,
                       "predicted_eff": c.predicted_eff * 100 if c.predicted_eff else None,
                       "basis": c.basis})
    return t


def holdout(result: Any) -> Table:
    """The held-out prediction (harness/perfmodel/holdout.py): every input fitted on runs
    with at most 2 workers, every larger run predicted from them alone."""
    from harness.perfmodel.holdout import FIT_MAX_WORKERS

    t = Table("holdout", f"Held-out prediction: fitted on runs with <= {FIT_MAX_WORKERS} "
                         "workers, judged on the larger ones", [
        Column("label", "configuration (held out)", digits=0), Column("workers", "workers"),
        Column("measured_ms", "measured", "ms"), Column("low_ms", "95% low", "ms"),
        Column("high_ms", "95% high", "ms"), Column("predicted_ms", "predicted", "ms"),
        Column("error_pct", "error", "%", 2),
        Column("machine", "machine (noise probe)", digits=0),
        Column("bound", "bound by (measured)", digits=0),
        Column("fitted_from", "inputs and the runs they were fitted on", digits=0)],
        note="A prediction, not a fit: no input comes from the runs in this table. "
             "Bound by: what the run's busiest emulated host saturated (CPU, wire or "
             "neither; the table 'What bound the step'), and where the step was simulated "
             "its busiest host's CPU and wire measured / simulated. Machine: 'disturbed' "
             "where the noise probe read the machine below its usual best during the "
             "measured run (its error may be the machine's). "
             + (f"Fitted from runs the probe read disturbed: "
                f"{'; '.join(result.disturbed_fits)}. " if result and result.disturbed_fits
                else "")
             + (f"Fitted from runs the work meter read slow (their workers spent more than "
                f"{workmeter.SLOW:.1f}x their workload's usual CPU per step: a slow CPU the "
                f"probe does not see): {'; '.join(result.slow_fits)}. "
                if result and result.slow_fits else "")
             + "; ".join(f"link {k}: {v}" for k, v in (result.links if result else {}).items()))
    from harness.perfmodel.holdout import bound_text

    bound = {b.run_id: b for b in result.bottlenecks} if result else {}
    for r in result.rows if result else []:
        t.rows.append({"label": r.label, "workers": r.workers,
                       "bound": bound_text(bound.get(r.run_id), r.simulated_busy) or None,
                       "measured_ms": r.measured * 1e3,
                       "low_ms": r.measured_low * 1e3 if r.measured_low else None,
                       "high_ms": r.measured_high * 1e3 if r.measured_high else None,
                       "predicted_ms": r.predicted * 1e3, "error_pct": r.error * 100,
                       "machine": "disturbed" if r.disturbed else None,
                       "fitted_from": r.fitted_from, "_held": r})
    return t


def traffic(runs: list[dict]) -> Table:
    """The model's bytes per host against the emulated hosts' counters
    (harness/perfmodel/traffic.py): the model's traffic checked where nothing was fitted."""
    from harness.perfmodel import traffic as tr

    t = Table("traffic", "Bytes per host: the model against the kernel's counters", [
        Column("label", "run", digits=0), Column("steps", "steps"),
        Column("modelled_mb", "busiest host, modelled", "MB", 4),
        Column("counted_mb", "busiest host, counted", "MB", 4),
        Column("low_pct", "hosts from", "%", 2), Column("high_pct", "to", "%", 2),
        Column("verdict", "verdict", digits=0)],
        note="Bytes each emulated host sent per step: the model's from the strategy's "
             "structure and the framework's placement rule alone, and the interface's "
             "counters over the run's steps. Start-up (the first weights) adds up to one "
             f"step, on the median host for allreduce; {tr.TOLERANCE:.0%} more either way "
             "is a mismatch.")
    for c in filter(None, map(tr.check, runs)):
        t.rows.append({"label": c.label, "steps": c.steps,
                       "modelled_mb": c.modelled[0] / 1e6, "counted_mb": c.measured[0] / 1e6,
                       "low_pct": (min(c.ratios) - 1) * 100,
                       "high_pct": (max(c.ratios) - 1) * 100,
                       "verdict": "ok" if c.ok else "MISMATCH"})
    return t


def rank_paces(result: Any) -> Table:
    """How far apart each asynchronous run's ranks ran (harness/perfmodel/paces.py): the
    assumption the model's asynchronous step rests on, checked where it predicts one."""
    from harness.perfmodel import paces

    t = Table("paces", "Asynchronous ranks: one pace, as the model holds them", [
        Column("label", "run", digits=0),
        Column("spread", "slowest rank over the fastest", "x", 4),
        Column("verdict", "verdict", digits=0)],
        note="Each rank's timed iterations summed: the slowest rank's over the fastest's. "
             "The model lets no asynchronous worker begin a step before every other has "
             "begun the one before, because measured ranks kept one pace (1.00-1.11x on "
             f"every shipped multi-host dist_async run); above {paces.ONE_PACE:.2f}x a rank "
             "ran ahead and the model's step does not describe the run.")
    for p in result.rank_paces if result else []:
        t.rows.append({"label": p.label, "spread": p.spread,
                       "verdict": "one pace" if p.ok else "NOT ONE PACE"})
    return t


def bottlenecks(runs: list[dict]) -> Table:
    """What bound each step across emulated hosts, measured (harness/bottleneck.py): the
    explanation a model's prediction has to match."""
    from harness import bottleneck as bn

    t = Table("bottleneck", "What bound the step: each run's busiest host, measured", [
        Column("label", "run", digits=0), Column("t_iter_ms", "t_iter", "ms"),
        Column("cpu_pct", "CPU of its quota", "%", 2),
        Column("wire_pct", "wire, share of the step", "%", 2),
        Column("verdict", "bound by", digits=0)],
        note="CPU: the cores of the processes the plan put on the busiest host (workers, "
             "servers, scheduler) over its CPU quota, from the telemetry while measuring. "
             "Wire: the larger of the bytes its interface sent and received per step over "
             f"the link's shaped rate, as a share of the step. {bn.SATURATED:.0%} or more "
             "is saturated; where neither is, the step waited (a synchronous barrier, "
             "latency).")
    for b in filter(None, map(bn.check, runs)):
        t.rows.append({"label": b.label, "t_iter_ms": b.t_iter_s * 1e3,
                       "cpu_pct": b.cpu * 100 if b.cpu is not None else None,
                       "wire_pct": b.wire * 100 if b.wire is not None else None,
                       "verdict": b.verdict})
    return t


def failures(bad: list[dict]) -> Table:
    t = Table("failures", "Failed and skipped runs", [
        Column("status", "status", digits=0), Column("run", "run", digits=0),
        Column("reason", "reason", digits=0)])
    for r in bad:
        t.rows.append({"status": r["status"], "run": f"{display(r['framework'])} {r['model']} "
                       f"b{r['batch_size']} {r['image_size']}px {r['mode']} {r['strategy']} "
                       f"x{r['workers']}" + (f" [{r['label']}]" if r["label"] else ""),
                       "reason": r["reason"], "_tail": r["output_tail"]})
    return t


def pipeline_findings(pipe: Table) -> list[str]:
    out = []
    for row in pipe.rows:
        if row["bound"] is None:
            continue
        what = (f"{row['framework']} {row['model']} ({row['config']}, {row['loader_workers']} "
                f"loader workers): ")
        if row["bound"] == "input-bound":
            out.append(what + f"input-bound: the loader alone delivers {row['loader']:.1f} "
                       f"images/s, below the {row['synthetic']:.1f} images/s training sustains "
                       "on synthetic data.")
        else:
            cost = (f"; real data still costs {row['cost_pct']:.0f}% (shared cores)"
                    if row["cost_pct"] is not None and row["cost_pct"] > 5 else "")
            out.append(what + f"compute-bound: the loader alone delivers {row['loader']:.1f} "
                       f"images/s, above the {row['synthetic']:.1f} images/s of training{cost}.")
    return out


def findings(shoot: Table, scale: Table,
             rounds: dict[str, dict[int, float]] | None = None) -> list[str]:
    """Plain sentences from the data, saying when a difference is too small to rank: the
    two fastest frameworks per network and settings, compared by harness/verdicts.py
    (paired over interleaved rounds when they were measured together)."""
    out: list[str] = []
    groups: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for row in shoot.rows:
        r = row["_row"]
        best = groups[(r["model"], row["config"])].get(r["framework"])
        if best is None or r["images_per_s"] > best["images_per_s"]:
            groups[(r["model"], row["config"])][r["framework"]] = r
    for (model, cfg), by_fw in sorted(groups.items()):
        ranked = sorted(by_fw.values(), key=lambda r: -r["images_per_s"])
        top = ranked[0]
        if len(ranked) == 1:
            out.append(f"{model} ({cfg}): only {display(top['framework'])} measured, "
                       f"{top['images_per_s']:.1f} images/s.")
            continue
        v = verdicts.compare_pair(top, ranked[1], rounds or {})
        out.append(verdicts.sentence(model, cfg, v, lambda r: display(r["framework"])))
    by_scale: dict[tuple, list[dict]] = defaultdict(list)
    largest: dict[tuple, dict] = {}
    for row in scale.rows:
        r = row["_row"]
        by_scale[(r["model"], row["config"], r["workers"])].append(row)
        key = (row["framework"], r["model"], r["strategy"], row["config"])
        if key not in largest or r["workers"] > largest[key]["workers"]:
            largest[key] = row
    for (model, cfg, n), rows in sorted(by_scale.items()):
        if len(rows) > 1:
            best = max(rows, key=lambda x: x["images_per_s"])
            out.append(f"{model} ({cfg}) at {n} workers: {best['framework']} {best['strategy']} "
                       f"is the fastest strategy ({best['images_per_s']:.1f} images/s).")
    for (fw, model, strategy, cfg), row in sorted(largest.items()):
        if row["efficiency_pct"] is not None:
            out.append(f"{fw} {model} {strategy} ({cfg}): {row['efficiency_pct']:.0f}% scaling "
                       f"efficiency at {row['workers']} workers, the largest scale measured.")
    return out
