"""`dnnbench data check`: does a dataset decode in each framework, with the same labels,
and do the workers' shards split it exactly?

Each (framework, rank) is a process in that framework's environment running one ordered
pass of the training pipeline (frameworks.datacheck); this module only compares what they
report, so the harness never imports a framework.
"""

from __future__ import annotations

from dataclasses import dataclass

from frameworks import events
from frameworks.contract import RunSpec
from frameworks.plan import PlanContext, worker_env
from harness import envs, jobs
from harness.jobs import worker_source_root
from runners.spec import ProcessSpec


@dataclass
class FrameworkCheck:
    framework: str
    ok: bool
    reason: str
    ranks: list[dict]  # one DATA event per rank

    @property
    def label_counts(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for r in self.ranks:
            for k, v in r["label_counts"].items():
                total[k] = total.get(k, 0) + v
        return dict(sorted(total.items(), key=lambda kv: int(kv[0])))

    @property
    def shards_disjoint(self) -> bool:
        seen: set[int] = set()
        for r in self.ranks:
            mine = set(r["indices"])
            if seen & mine:
                return False
            seen |= mine
        return True

    @property
    def images(self) -> int:
        return sum(r["images"] for r in self.ranks)


def check(root: str, frameworks: list[str], image_size: int = 64, world: int = 1,
          loader_workers: int = 2, timeout: float = 600.0) -> list[FrameworkCheck]:
    out = []
    for fw in frameworks:
        env = envs.find(fw, "cpu")
        spec = RunSpec(fw, "resnet50", batch_size=16, image_size=image_size, data=root,
                       loader_workers=loader_workers, devices_per_node=world)
        ctx = PlanContext(env.python, worker_source_root(), "datacheck")
        procs = [ProcessSpec("rank", r, (env.python, "-m", "frameworks.datacheck"),
                             {**worker_env(spec, ctx, r, r, world), "TF_CPP_MIN_LOG_LEVEL": "2"})
                 for r in range(world)]
        job = jobs.run(jobs.Job(procs, "local"), timeout)
        evs = [ev for p in job.processes for ev in map(events.parse, p.lines) if ev]
        ranks = sorted((ev for ev in evs if ev["event"] == events.DATA),
                       key=lambda ev: ev["rank"])
        errors = [ev["reason"] for ev in evs if ev["event"] == events.ERROR]
        ok = job.ok and len(ranks) == world
        reason = "" if ok else (errors[0] if errors else
                                "timed out" if job.timed_out else
                                "\n".join(job.failure_tail(8)))
        out.append(FrameworkCheck(fw, ok, reason, ranks))
    return out


def describe(results: list[FrameworkCheck]) -> tuple[list[str], bool]:
    """Lines for the terminal, and whether every framework agreed."""
    lines = []
    counts = {r.framework: r.label_counts for r in results if r.ok}
    agree = all(r.ok for r in results) and len({tuple(c.items()) for c in counts.values()}) <= 1
    for r in results:
        if not r.ok:
            lines.append(f"{r.framework:<11} FAILED: {r.reason}")
            continue
        first = r.ranks[0]
        skipped = sum(x["corrupt_skipped"] for x in r.ranks)
        lines.append(
            f"{r.framework:<11} {r.images} images in {first['classes']} classes decoded "
            f"({skipped} corrupt skipped), sample {'x'.join(map(str, first['sample_shape']))}, "
            f"pixel mean {first['pixel_mean']:+.2f} std {first['pixel_std']:.2f}, "
            f"{len(r.ranks)} shard(s) {'disjoint' if r.shards_disjoint else 'OVERLAPPING'}")
        agree = agree and r.shards_disjoint
    if counts:
        any_counts = next(iter(counts.values()))
        failed = sum(not r.ok for r in results)
        verdict = (f"(not comparable: {failed} framework(s) failed)" if failed else
                   "(identical in every framework)" if agree else "(DIFFER between frameworks)")
        lines.append("label counts: " + ", ".join(f"{k}:{v}" for k, v in any_counts.items())
                     + "  " + verdict)
    return lines, agree
