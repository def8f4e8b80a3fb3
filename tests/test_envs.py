"""Environment lookup: the Horovod build is preferred, a build without it (make demo's)
serves every other strategy, and a Horovod run on such a build names the fix."""

import json

import pytest

from harness import envs


def _fake_ready(path):
    path.mkdir(parents=True)
    (path / envs.MARKER).write_text(json.dumps({"framework": "torch", "variant": "cpu"}))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DNNBENCH_CACHE", str(tmp_path))
    monkeypatch.delenv("DNNBENCH_HOROVOD", raising=False)
    return tmp_path


def test_keys_differ_with_and_without_horovod(cache):
    assert envs.env_path("torch", "cpu", True) != envs.env_path("torch", "cpu", False)
    assert envs.env_path("torch", "cpu") == envs.env_path("torch", "cpu", True)
    # a framework without Horovod support has one key whatever is asked
    assert envs.env_path("jax", "cpu") == envs.env_path("jax", "cpu", False)


def test_find_prefers_horovod_and_falls_back_without_it(cache):
    with pytest.raises(envs.EnvError, match="run: dnnbench env setup torch$"):
        envs.find("torch")
    without = envs.env_path("torch", "cpu", False)
    _fake_ready(without)
    assert envs.find("torch").path == without
    with pytest.raises(envs.EnvError, match="built without Horovod.*dnnbench env setup torch"):
        envs.find("torch", horovod=True)
    full = envs.env_path("torch", "cpu", True)
    _fake_ready(full)
    assert envs.find("torch").path == full and envs.find("torch", horovod=True).path == full
    # setup without Horovod reuses the cached build with it, building nothing
    assert envs.setup("torch", horovod=False, echo=lambda s: None).path == full


def test_env_setup_help_teaches_no_horovod():
    from tests.conftest import run_cli

    out = run_cli("env", "setup", "--help").stdout
    assert "--no-horovod" in out and "default: every registered framework" in out


def test_env_setup_compiles_horovod_only_where_asked(cache):
    """`--horovod-for torch` (make test's): torch gets its Horovod build, every other
    framework the build without; nothing is built when both are cached already."""
    for fw, hvd in (("torch", True), ("tensorflow", False), ("jax", False)):
        _fake_ready(envs.env_path(fw, "cpu", hvd))
    done = envs.setup_many(["tensorflow", "torch", "jax"], "cpu",
                           {"torch": True, "tensorflow": False, "jax": False}, jobs=2,
                           echo=lambda s: None)
    assert [e.path for e in done] == [envs.env_path("tensorflow", "cpu", False),
                                      envs.env_path("torch", "cpu", True),
                                      envs.env_path("jax", "cpu", False)]


def test_env_setup_flags_refuse_bad_input():
    from tests.conftest import run_cli

    proc = run_cli("env", "setup", "--horovod-for", "torch,caffe")
    assert proc.returncode == 2 and "unknown framework(s) caffe; known: torch" in proc.stderr
    proc = run_cli("env", "setup", "--no-horovod", "--horovod-for", "torch")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
    proc = run_cli("env", "setup", "--jobs", "0", "torch")
    assert proc.returncode == 2 and "--jobs" in proc.stderr
    proc = run_cli("env", "setup", "torch", "caffe")  # refused before anything is built
    assert proc.returncode == 2 and "unknown framework 'caffe'; known: torch" in proc.stderr
    out = run_cli("env", "setup", "--help").stdout
    assert "--horovod-for" in out and "--jobs" in out


def test_env_setup_runs_the_next_step_on_each_env_in_its_slot(cache):
    """`env setup --images`: the step (an image build) runs on each environment as soon as
    it is ready, in that environment's build slot; a step that fails fails its framework
    only, after every other build and step ran to its end."""
    import threading

    for fw, hvd in (("torch", True), ("tensorflow", False), ("jax", False)):
        _fake_ready(envs.env_path(fw, "cpu", hvd))
    seen = []

    def step(env):
        seen.append((env.framework, threading.current_thread().name))
        if env.framework == "jax":
            raise envs.EnvError("jax image failed")

    with pytest.raises(envs.EnvError, match="^jax image failed$"):
        envs.setup_many(["tensorflow", "torch", "jax"], "cpu",
                        {"torch": True, "tensorflow": False, "jax": False}, jobs=2,
                        echo=lambda s: None, then=step)
    assert sorted(fw for fw, _ in seen) == ["jax", "tensorflow", "torch"]
    assert all(thread != threading.current_thread().name for _, thread in seen)


def test_env_setup_images_needs_an_engine_before_building_anything(tmp_path):
    from tests.conftest import run_cli

    proc = run_cli("env", "setup", "--images", "torch,caffe")
    assert proc.returncode == 2 and "unknown framework(s) caffe" in proc.stderr
    # no podman or docker on PATH: refused before any environment is made
    proc = run_cli("env", "setup", "--images", "torch", "torch",
                   env={"PATH": str(tmp_path), "DNNBENCH_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 2, proc.stderr
    assert "--images: neither podman nor docker is installed" in proc.stderr
    assert not (tmp_path / "cache" / "envs").exists()
    assert "--images" in run_cli("env", "setup", "--help").stdout
