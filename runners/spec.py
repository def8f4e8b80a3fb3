"""What a runner is asked to start, and what it reports back."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProcessSpec:
    """One process of a job: its role (worker, server, scheduler...), rank and command.

    `env` is added to the runner's base environment; the environment is the whole
    contract between launcher and worker.
    """

    role: str
    rank: int
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    memory_limit_bytes: int | None = None
    host: str = "127.0.0.1"  # where a multi-host runner places it
    #: A service (a TensorFlow parameter server, ...) serves until stopped: the job is
    #: finished when every non-service process has exited, then services are stopped.
    service: bool = False

    @property
    def tag(self) -> str:
        return f"{self.role}{self.rank}"


@dataclass
class ProcessResult:
    spec: ProcessSpec
    returncode: int | None
    lines: list[str]

    def tail(self, n: int = 20) -> list[str]:
        return self.lines[-n:]


@dataclass
class JobResult:
    processes: list[ProcessResult]
    elapsed: float
    timed_out: bool = False
    interrupted: bool = False
    failed_tag: str | None = None  # the first process that exited non-zero
    #: why the launcher gave up, where it knows more than "timeout_s passed" (a Slurm job
    #: that never left the queue)
    timeout_reason: str | None = None
    #: when the launcher started the job, unix seconds (None: unknown, as for a Slurm
    #: job, whose start its own output says)
    started: float | None = None

    @property
    def ok(self) -> bool:
        return (not self.timed_out and not self.interrupted
                and all(p.returncode == 0 for p in self.processes))

    def failure_tail(self, n: int = 20) -> list[str]:
        """Last lines of the process that failed first (or of all, on a timeout)."""
        for p in self.processes:
            if p.spec.tag == self.failed_tag:
                return [f"[{p.spec.tag}] {line}" for line in p.tail(n)]
        out: list[str] = []
        for p in self.processes:
            out.extend(f"[{p.spec.tag}] {line}" for line in p.tail(max(1, n // len(
                self.processes))))
        return out
