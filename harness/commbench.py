"""`dnnbench commbench`: allreduce over a size sweep through the libraries training uses.

Reports time, algorithm bandwidth (bytes / time) and bus bandwidth (nccl-tests: algbw x
2(n-1)/n, comparable across rank counts), checks the result (#wrong), stores every size in
the results DB and fits latency α and inverse bandwidth β (t = α + β·m) per library, which
the performance model then uses in place of a nominal link profile.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from frameworks import events
from frameworks.contract import SUPPORT
from frameworks.plan import PlanContext, free_port, worker_env
from harness import collect, envs, jobs
from harness.perfmodel.network import Link, bus_bandwidth, fit_alpha_beta
from harness.store import Store
from runners import emulated
from runners.spec import JobResult, ProcessSpec

#: library -> (framework environment it runs in, launcher): each framework's own libraries
#: (its SUPPORT.comm_libraries), then MPI and Horovod, run from the torch environment
LIBRARIES = {**{lib: (fw, launcher) for fw, sup in SUPPORT.items()
                for lib, launcher in sup.comm_libraries.items()},
             "mpi": ("torch", "mpirun"), "horovod-gloo": ("torch", "horovodrun"),
             "horovod-mpi": ("torch", "horovodrun-mpi")}
DEFAULT_SIZES = [4 * 4 ** k for k in range(13)] + [128 * 2**20]  # 4 B .. 64 MiB, 128 MiB


class CommbenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class CommResult:
    library: str
    ranks: int
    rows: list[dict]
    alpha: float
    beta: float

    def link(self) -> Link:
        return Link(f"measured:{self.library}", self.alpha, self.beta,
                    description=f"fitted from commbench, {self.ranks} ranks")


#: The largest message a sweep sends: a few of these fit in memory next to the ranks.
MAX_BYTES = 2**32


def parse_sizes(text: str) -> list[int]:
    """'4..128M' (powers of 4 plus the end) or '1K,1M,64M'; CommbenchError for anything
    else, or sizes outside 1 byte..MAX_BYTES."""
    def one(tok: str) -> int:
        tok = tok.strip().upper()
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(tok[-1:], 1)
        try:
            value = float(tok[:-1] if mult > 1 else tok) * mult
        except ValueError:
            value = float("nan")
        if not 1 <= value <= MAX_BYTES:  # NaN too
            raise CommbenchError(f"--sizes {text!r}: {tok!r} is not a size from 1 to 4G "
                                 "bytes (e.g. 4..128M or 1K,1M,64M)")
        return int(value)

    if ".." in text:
        lo, hi = (one(t) for t in text.split("..", 1))
        if lo > hi:
            raise CommbenchError(f"--sizes {text!r}: the range runs from small to large")
        sizes, s = [], lo
        while s < hi:
            sizes.append(s)
            s *= 4
        return sizes + [hi]
    return [one(t) for t in text.split(",") if t.strip()]


def plan(library: str, ranks: int, sizes: list[int], python: str, source_root: str,
         iters: int, timeout: float, hosts: tuple[str, ...] = ("127.0.0.1",)
         ) -> list[ProcessSpec]:
    """Rank r on hosts[r % len(hosts)]; MXNet's servers likewise, its scheduler on the
    first host."""
    job = json.dumps({"library": library, "sizes": sizes, "iters": iters, "warmup": 2,
                      "timeout_s": timeout})
    port = str(free_port())
    from frameworks.contract import RunSpec

    framework = LIBRARIES[library][0]
    spec = RunSpec(framework, "resnet50", devices_per_node=ranks, strategy="allreduce")
    per_host = -(-ranks // len(hosts))
    ctx = PlanContext(python, source_root, "commbench", hosts=hosts,
                      cores_per_host=max(1, (os.cpu_count() or 1) // len(hosts)))
    out = []
    tf_workers = [f"{ctx.host_of(rank)}:{free_port()}" for rank in range(ranks)] \
        if library.startswith("tf-") else []
    for rank in range(ranks):
        env = worker_env(spec, ctx, rank, rank // len(hosts), per_host)
        env.update(DNNBENCH_COMM=job, MASTER_ADDR=ctx.host_of(0), MASTER_PORT=port,
                   RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank))
        if tf_workers:
            from frameworks.tensorflow.plan import QUIET, tf_config

            env.update(QUIET, TF_CONFIG=tf_config(tf_workers, rank))
        out.append(ProcessSpec("rank", rank, (python, "-m", "frameworks.commbench"), env,
                               host=ctx.host_of(rank)))
    if library == "mxnet-kvstore":
        # one server per worker, co-located: the parameter-server layout of both papers
        from frameworks.mxnet.plan import dmlc_env

        ps_spec = RunSpec("mxnet", "resnet50", devices_per_node=ranks, strategy="ps-sync",
                          ps=ranks)
        serve = (python, "-c", "import mxnet")
        quiet = {"OMP_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1"}
        roles = [ProcessSpec("scheduler", 0, serve,
                             {**quiet, **dmlc_env(ps_spec, ctx, "scheduler", port)},
                             host=ctx.host_of(0))]
        roles += [ProcessSpec("server", i, serve,
                              {**quiet, **dmlc_env(ps_spec, ctx, "server", port)},
                              host=ctx.host_of(i))
                  for i in range(ranks)]
        for p in out:
            p.env.update(dmlc_env(ps_spec, ctx, "worker", port))
        out = roles + out
    return out


def run(library: str, ranks: int, sizes: list[int], store: Store | None = None,
        iters: int = 10, timeout: float = 600, link_label: str = "local",
        experiment: str = "commbench", source_root: str | None = None,
        hosts: int = 0) -> CommResult:
    """The size sweep through one library; with `hosts`, across that many emulated hosts
    joined at `link_label` (a rate such as 1gbit, or unshaped)."""
    if library not in LIBRARIES:
        raise CommbenchError(f"unknown library {library!r}; known: {', '.join(LIBRARIES)}")
    if ranks < 2:
        raise CommbenchError("commbench needs at least 2 ranks")
    if not all(1 <= n <= MAX_BYTES for n in sizes):
        raise CommbenchError(f"sizes: each message must be 1 byte to {MAX_BYTES >> 30} GiB")
    if len(set(sizes)) < 2:
        raise CommbenchError(f"sizes {sizes}: give at least two message sizes (alpha and "
                             "beta are fitted from them), e.g. --sizes 4..128M")
    framework, launcher = LIBRARIES[library]
    env = envs.find(framework, horovod=library.startswith("horovod"))
    if source_root is None:
        source_root = jobs.worker_source_root()
    if not hosts:
        procs = plan(library, ranks, sizes, env.python, source_root, iters, timeout)
        job = jobs.run(jobs.for_library(procs, launcher), timeout)
    else:
        if launcher == "horovodrun":
            raise CommbenchError("horovod-gloo cannot run across emulated hosts (horovodrun "
                                 "starts remote ranks over ssh); use horovod-mpi, which "
                                 "mpirun starts through its launch agent")
        try:
            cluster, made = emulated.ensure(hosts, link_label)
        except emulated.ClusterError as exc:
            raise CommbenchError(str(exc)) from None
        try:
            procs = plan(library, ranks, sizes, env.python, source_root, iters, timeout,
                         tuple(cluster.addresses))
            job = jobs.run(jobs.across(procs, cluster, launcher), timeout)
        finally:
            emulated.release(take_down=made)
    return _result(library, ranks, job, store, link_label, experiment, max(1, hosts))


def _result(library: str, ranks: int, job: JobResult, store: Store | None, link_label: str,
            experiment: str, nodes: int) -> CommResult:
    evs = collect.job_events(job)
    errors = [e["reason"] for e in evs if e["event"] == events.ERROR]
    if not job.ok or errors:
        tail = "\n".join(job.failure_tail(15))
        raise CommbenchError(f"{library} commbench failed: "
                             f"{errors[0] if errors else 'exit status'}\n{tail}")
    run_id, started = collect.new_run_id(), collect.now_iso()
    by_size: dict[int, dict] = {}
    ops: dict[int, str] = {}
    for e in evs:
        if e["event"] != events.COMM:
            continue
        row = by_size.setdefault(e["bytes"], {"times": [], "wrong": 0})
        row["times"].append(e["median"])  # each rank's median; the slowest rank counts
        row["wrong"] += e["wrong"]
        ops[e["bytes"]] = e.get("op", "allreduce")
    rows = []
    for nbytes in sorted(by_size):
        t = max(by_size[nbytes]["times"])
        rows.append({"run_id": run_id, "started": started, "experiment": experiment,
                     "library": library, "op": ops.get(nbytes, "allreduce"), "ranks": ranks,
                     "nodes": nodes,
                     "link": link_label, "bytes": nbytes, "median_s": t,
                     "algbw": nbytes / t, "busbw": bus_bandwidth(ranks, nbytes, t),
                     "wrong": by_size[nbytes]["wrong"],
                     "times_json": json.dumps(by_size[nbytes]["times"])})
    if store is not None:  # the measurements first: a fit that fails loses nothing
        store.add_comm(rows)
    alpha, beta = fit(rows)
    return CommResult(library, ranks, rows, alpha, beta)


def fit(rows: list[dict]) -> tuple[float, float]:
    """α from the smallest messages, β from the large ones: a single least-squares line
    over sizes spanning 7 orders of magnitude would let the largest dominate both."""
    rows = sorted(rows, key=lambda r: r["bytes"])
    small = [r["median_s"] for r in rows if r["bytes"] <= 4096] or [rows[0]["median_s"]]
    big = [r for r in rows if r["bytes"] >= 2**20]
    big = big if len(big) >= 2 else rows[-2:]
    _, beta = fit_alpha_beta([r["bytes"] for r in big], [r["median_s"] for r in big])
    alpha = min(small)
    if beta <= 0:
        # Noise flattened the slope (few, noisy large sizes): a bandwidth cannot be infinite,
        # so take the largest message's per-byte time after latency.
        last = rows[-1]
        beta = max(last["median_s"] - alpha, last["median_s"] / 2) / max(last["bytes"], 1)
    return alpha, beta


def fitted_link(store: Store, library: str, ranks: int | None = None,
                link: str | None = None) -> Link | None:
    """The newest commbench fit for a library (optionally at a rank count, on a link
    label such as "local" or an emulated rate) in the DB."""
    where, params = "WHERE library = ?", [library]
    if ranks:
        where += " AND ranks = ?"
        params.append(ranks)
    if link:
        where += " AND link = ?"
        params.append(link)
    rows = store.comm(where, params)
    if not rows:
        return None
    newest = rows[-1]["run_id"]
    alpha, beta = fit([r for r in rows if r["run_id"] == newest])
    return Link(f"measured:{library}", alpha, beta, description="fitted from commbench")
