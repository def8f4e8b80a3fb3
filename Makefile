# The two commands of the README's quick start are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# empty: every registered framework (a folder of frameworks/ that declares SUPPORT)
FRAMEWORKS ?=
RESULTS ?= results
# base image for `make bench`'s container image: local = a debootstrap base made here (no
# registry needed); python:3.11-slim-bookworm where a registry is reachable
IMAGE_BASE ?= local

.PHONY: demo test test-all test-fast lint bench bench-scaling clean-results help

help:
	@echo "make demo       set up, run the default benchmark, write $(RESULTS)/report.html"
	@echo "make test       set up and run the test suite (what CI runs)"
	@echo "make test-all   the same and the extended tier (more frameworks per path)"
	@echo "make test-fast  tests that need no framework env, root or daemon (~4 min)"
	@echo "make bench      benchmarks of the harness itself (bench/, ~50 min)"
	@echo "make bench-scaling  emulated scaling sweeps to 8 hosts + held-out model check (root, ~80 min)"

# the default benchmark runs no Horovod job: its environments skip the Horovod build (about
# 3 minutes per framework; a cached build with Horovod is reused)
demo:
	@harness/system-deps.sh --runtime; \
	venv=$$(harness/bootstrap.sh); \
	$$venv/bin/dnnbench env setup --no-horovod --jobs 2 $(FRAMEWORKS); \
	$$venv/bin/dnnbench run --experiment experiments/default.toml \
	    --db $(RESULTS)/default.db --csv $(RESULTS)/default.csv --report $(RESULTS)/report.html

# Horovod is compiled only for torch here (its binding is the one the default tier runs:
# tests/conftest.py DEFAULT_TIER_HOROVOD); test-all compiles it for every framework.
# The container tests' images are made in the setup's second build slot, while the torch
# Horovod compile holds the first (on a fresh machine they would otherwise be built, one
# after another, by the tests' fixtures); without root, podman or debootstrap those tests
# skip, and no image is made.
TEST_IMAGES ?= torch,tensorflow,mxnet
# Two runs of pytest, both always run: first the tests marked `parallel` (stored data, plans
# and refusals: nothing they time, no load they read; tests/conftest.py PARALLEL_MODULES),
# one process per core, a test file to a process (so it keeps the steps its tests simulate:
# harness/perfmodel/predict.py `_played`); then every other test, one at a time, as a
# measurement needs the machine to itself.
PYTEST_PARALLEL = $$venv/bin/python -m pytest -q -rs -n auto --dist loadfile --durations=10
ALONE = not parallel and not extended
test:
	@harness/system-deps.sh; \
	venv=$$(harness/bootstrap.sh); \
	images=; if [ "$$(id -u)" = 0 ] && command -v podman >/dev/null \
	    && command -v debootstrap >/dev/null; then images="--images $(TEST_IMAGES)"; fi; \
	$$venv/bin/dnnbench env setup --horovod-for torch $$images --jobs 2 $(FRAMEWORKS); \
	$$venv/bin/ruff check .; \
	rc=0; $(PYTEST_PARALLEL) -m "parallel and not extended" || rc=$$?; \
	$$venv/bin/python -m pytest -q -rs --durations=25 -m "$(ALONE)" || rc=$$?; \
	exit $$rc

# everything, the `extended` tier included (another framework's or network's run of paths
# `make test` covers; about 12 minutes more, a fifth image build among them)
test-all:
	@harness/system-deps.sh; \
	venv=$$(harness/bootstrap.sh); \
	$$venv/bin/dnnbench env setup --jobs 2 $(FRAMEWORKS); \
	$$venv/bin/ruff check .; \
	rc=0; $(PYTEST_PARALLEL) -m parallel || rc=$$?; \
	$$venv/bin/python -m pytest -q -rs --durations=25 -m "not parallel" || rc=$$?; \
	exit $$rc

# no framework environment, no root, no daemon: the harness's own venv only (~4 min)
test-fast:
	@venv=$$(harness/bootstrap.sh); $$venv/bin/ruff check .; \
	rc=0; $(PYTEST_PARALLEL) -m "parallel and not slow" || rc=$$?; \
	$$venv/bin/python -m pytest -q -m "not parallel and not slow and not heavy" || rc=$$?; \
	exit $$rc

lint:
	@venv=$$(harness/bootstrap.sh); $$venv/bin/ruff check .

bench:
	@harness/system-deps.sh --runtime; \
	venv=$$(harness/bootstrap.sh); \
	$$venv/bin/dnnbench env setup $(FRAMEWORKS); \
	$$venv/bin/python bench/run.py; \
	$$venv/bin/python -m bench.telemetry; \
	$$venv/bin/python -m bench.selfsample; \
	$$venv/bin/python -m bench.comm_ratio; \
	$$venv/bin/python -m bench.strategies; \
	$$venv/bin/python -m bench.repeatability; \
	$$venv/bin/python -m bench.gate_probe; \
	if command -v podman >/dev/null || command -v docker >/dev/null; then \
	  $$venv/bin/dnnbench image build torch --base-image $(IMAGE_BASE); \
	  $$venv/bin/python -m bench.containers; \
	else echo "bench.containers skipped: no podman or docker"; fi

# the emulated scaling curves (1-8 hosts of a fixed CPU share) and the model's held-out
# check on them (bench/holdout.py); needs root; resumes what results/ already holds
bench-scaling:
	@harness/system-deps.sh --runtime; \
	venv=$$(harness/bootstrap.sh); \
	$$venv/bin/dnnbench env setup --horovod-for torch,mxnet,tensorflow --jobs 2 torch mxnet tensorflow jax; \
	$$venv/bin/python -m bench.holdout

clean-results:
	rm -rf $(RESULTS)
