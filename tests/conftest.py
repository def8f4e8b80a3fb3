"""Shared fixtures. Framework environments are the real cached ones (`dnnbench env setup`)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: the tests' sweeps must not enter the user's host history (harness/repeat.py), which
#: widens the repeat intervals of real results
_HISTORY_DIR = tempfile.mkdtemp(prefix="dnnbench-test-history-")
os.environ["DNNBENCH_HISTORY"] = str(Path(_HISTORY_DIR) / "history.db")
atexit.register(shutil.rmtree, _HISTORY_DIR, True)
#: every run the session records, in any process (tests/cells.py reads it at the end)
RUN_LOG = Path(_HISTORY_DIR) / "runs.jsonl"
os.environ["DNNBENCH_RUN_LOG"] = str(RUN_LOG)


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """The installed console script, as a user runs it."""
    exe = Path(sys.executable).parent / "dnnbench"
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def cli_here(*args: str) -> subprocess.CompletedProcess:
    """The CLI run in this process (harness.cli.main, what the console script calls), its
    output captured: for the held-out validations of shipped sets, which spend their time
    simulating steps the model remembers by their inputs (predict._played), so a test that
    validates a set another test validated, or the same set with one option more, plays
    only the steps it adds; in a process of its own it would play them all again (110 of
    the 865 s the held-out tests spent simulating, 2026-12-06). The signal handlers main()
    sets are put back after. Errors and exit codes stay tested through run_cli."""
    import contextlib
    import io
    import signal

    from harness import cli

    out, err = io.StringIO(), io.StringIO()
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGPIPE, signal.SIGTERM,
                                                    signal.SIGHUP)}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse's own exit
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)
    return subprocess.CompletedProcess(["dnnbench", *args], code, out.getvalue(),
                                       err.getvalue())


def stored_tails(db: str | Path) -> str:
    """Every stored run's status, reason and output tail: what a failed CLI run's
    assertion shows, so a hang or crash in CI can be read from the log alone."""
    import sqlite3

    if not Path(db).is_file():
        return f"\n(no database at {db})"
    rows = sqlite3.connect(db).execute("SELECT status, reason, output_tail FROM runs").fetchall()
    return "".join(f"\n--- stored run: {st}: {why}\n{tail}" for st, why, tail in rows)


@pytest.fixture(scope="session")
def torch_env():
    from harness import envs

    return envs.setup("torch", "cpu", echo=lambda s: None)


#: every registered framework (frameworks/<name>/ declaring SUPPORT): a new framework
#: joins every parametrised test without editing them
FRAMEWORKS = tuple(__import__("frameworks.contract", fromlist=["SUPPORT"]).SUPPORT)


def frameworks_with(strategy: str) -> tuple[str, ...]:
    """The registered frameworks that support `strategy` (their SUPPORT says so)."""
    from frameworks.contract import SUPPORT

    return tuple(fw for fw in FRAMEWORKS if strategy in SUPPORT[fw].strategies)


def training_model(framework: str) -> str:
    """The network a test trains when the network is not what it checks: GoogLeNet (batch
    norm, many small tensors), but ResNet-50 for JAX, whose XLA compile of it takes half
    of GoogLeNet's here (and has batch norm too)."""
    return "resnet50" if framework == "jax" else "googlenet"


#: The network a test runs when it checks plumbing around the step (data, probes, tables),
#: not training: HEP-CNN builds and compiles in seconds in every framework (ResNet-50: up
#: to ~40 s of XLA compile or graph build per framework here).
PLUMBING_MODEL = "hepcnn"

#: The frameworks whose Horovod binding the default tier runs (and `make test` compiles,
#: 3 minutes each on a fresh 2-core machine); the other bindings run in the extended tier.
DEFAULT_TIER_HOROVOD = ("torch",)


def horovod_frameworks() -> list:
    """Parameters for a test of every framework's Horovod binding, the extended tier's
    marked as such."""
    return [fw if fw in DEFAULT_TIER_HOROVOD else pytest.param(fw, marks=pytest.mark.extended)
            for fw in frameworks_with("horovod")]


@pytest.fixture(scope="session")
def all_envs():
    """Every framework's environment (cached; `make test` creates them first), with Horovod
    where the default tier runs it (an environment with Horovod serves the others too)."""
    from harness import envs

    return {fw: envs.setup(fw, "cpu", echo=lambda s: None, horovod=fw in DEFAULT_TIER_HOROVOD)
            for fw in FRAMEWORKS}


@pytest.fixture
def horovod_env():
    """framework -> its environment with Horovod compiled in (built on first use)."""
    from harness import envs

    return lambda fw: envs.setup(fw, "cpu", echo=lambda s: None, horovod=True)


#: Fixtures that need a framework environment, an image or a daemon: a test using any of
#: them (directly or through another fixture) is in the `heavy` tier.
HEAVY_FIXTURES = {"torch_env", "all_envs", "horovod_env", "torch_image", "ps_images", "slurm",
                  "report_db", "dataset"}
#: Modules whose every test needs root (network namespaces, cgroups) or a daemon.
HEAVY_MODULES = {"test_emulated"}


#: `make test`'s second run (Makefile ALONE): every test of the default tier not marked
#: parallel; after it, as after a whole session, the launcher table is printed
ALONE = "not parallel and not extended"

#: Modules whose tests outside the heavy tier compute from stored data, plans or refusals
#: alone: none times a process, reads the machine's load or counters, needs root or writes
#: a shared path (each process has its own history and run log, above). They may run beside
#: one another, so `make test` runs them first in one process per core (-m parallel,
#: pytest-xdist), then every other test alone (-m "not parallel"): most of them are the
#: held-out validations of the shipped databases, single-threaded Python that left the
#: second core idle. Not here: modules with a test that times or loads the machine
#: (test_noise, test_interleave, test_data_pipeline, test_process_runner, ...), which a
#: neighbour would disturb. A test of these modules that needs root is marked heavy.
PARALLEL_MODULES = {
    "test_model_validation", "test_packet_work", "test_ps_pieces", "test_server_requests",
    "test_perfmodel", "test_worker_cost", "test_hardening", "test_contract",
    "test_experiment", "test_cost_model", "test_stats", "test_findings", "test_scaling",
    "test_serverload", "test_fuzz_input", "test_cells", "test_replicates", "test_bottleneck",
    "test_scoreboard", "test_doc_references", "test_workmeter"}


def pytest_collection_modifyitems(config, items):
    """Tiers: `make test-fast` runs what needs no framework environment, no root and no
    daemon (-m "not slow and not heavy"); `make test` all but the `extended` tier (-m
    "not extended"), the `parallel` tests first, beside one another; `make test-all`
    everything."""
    for item in items:
        if (HEAVY_FIXTURES & set(item.fixturenames) or item.get_closest_marker("slow")
                or item.module.__name__.rsplit(".", 1)[-1] in HEAVY_MODULES):
            item.add_marker(pytest.mark.heavy)
        elif (not item.get_closest_marker("heavy")
              and item.module.__name__.rsplit(".", 1)[-1] in PARALLEL_MODULES):
            item.add_marker(pytest.mark.parallel)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """After a session that ran heavy tests: which launcher-table cells it ran (tests/cells.py)."""
    if (config.getoption("markexpr", "") not in ("", "not extended", ALONE, "not parallel")
            or config.option.keyword
            or config.option.collectonly
            or config.option.file_or_dir):  # (not `-m`'s value, as it read before 2026-12-06)
        return  # a tier or a selection: the table would only list what was left out
    from tests import cells

    for line in cells.summary(RUN_LOG):
        terminalreporter.write_line(line)
