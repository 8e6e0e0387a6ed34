"""podrl.run.compile_cache: the persistent compilation cache is on by default for training runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from podrl.core.errors import ConfigError
from podrl.run import compile_cache

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_folder_is_under_the_users_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.default_dir() == str(tmp_path / "xdg" / "podrl" / "jax")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compile_cache.default_dir() == str(tmp_path / "home" / ".cache" / "podrl" / "jax")


def test_auto_keeps_a_cache_dir_already_set_and_none_or_a_folder_override_it(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "set"))
    assert compile_cache.resolve("auto") == str(tmp_path / "set")
    assert compile_cache.resolve("none") is None and compile_cache.resolve("NONE") is None
    assert compile_cache.resolve(str(tmp_path / "mine")) == str(tmp_path / "mine")


@pytest.mark.parametrize("bad", ["", "  "])
def test_an_empty_setting_or_a_file_is_a_config_error(bad, tmp_path):
    with pytest.raises(ConfigError, match="compile_cache"):
        compile_cache.resolve(bad)
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="compile_cache.*is a file"):
        compile_cache.resolve(str(tmp_path / "f"))


def _train(tmp_path: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "scripts/train_anakin.py", "--env", "MatchSign-v0", "--num-envs", "8",
               "--rollout-length", "16", "--total-steps", "256", "--updates-per-call", "2", "--eval-every", "0",
               "--eval-episodes", "0",
               "--num-devices", "1", "--logging.run-dir", str(tmp_path / "runs"), "--logging.no-tensorboard",
               *flags]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=200)


@pytest.mark.timeout(420)
def test_a_training_run_fills_the_default_cache_and_none_turns_it_off(tmp_path, user_env):
    """No JAX_COMPILATION_CACHE_DIR (as in a user's shell): the run writes its compiled programs
    under $XDG_CACHE_HOME/podrl/jax; `--compile-cache none` writes none there."""
    env = {**user_env, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    cache = tmp_path / "xdg" / "podrl" / "jax"
    off = _train(tmp_path, env, "--compile-cache", "none")
    assert off.returncode == 0, off.stderr[-2000:]
    assert not cache.exists() or not any(cache.iterdir())
    done = _train(tmp_path, env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert cache.is_dir() and any(cache.iterdir()), "the default run cached nothing"
