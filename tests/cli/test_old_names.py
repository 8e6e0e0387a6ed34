"""Checkpoints saved before podrl's envs/ installed as `podrl.envs`: a saved `run.env` that names one of
podrl's own modules by its old path (`envs.tiny:MatchSign`) loads on `podrl evaluate` and `--resume`
as `podrl.envs.tiny:MatchSign`, saying so in one line; a user's own `envs.<module>` keeps its name, and
an old path podrl never had is not renamed (the error names it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from podrl.agents.ppo import PPOConfig
from podrl.anakin import AnakinConfig, train_anakin
from podrl.envs.registry import renamed_env
from podrl.run.config import LoggingConfig

PODRL = [sys.executable, "-m", "podrl"]
NOTE = "note: the checkpoint's env 'envs.tiny:MatchSign' is podrl's own module by its old path; " \
       "read as 'podrl.envs.tiny:MatchSign'"


@pytest.mark.parametrize("name, renamed", [
    ("envs.tiny:MatchSign", "podrl.envs.tiny:MatchSign"),
    ("dm_env:envs.tiny:MatchSign", "dm_env:podrl.envs.tiny:MatchSign"),
    ("envs.adapters.gymnasium:GymnasiumVectorEnv", "podrl.envs.adapters.gymnasium:GymnasiumVectorEnv"),
    ("envs.no_such_module:X", None),  # podrl never had it: a user's, or a typo; left for the resolver
    ("MatchSign-v0", None),
    ("podrl.envs.tiny:MatchSign", None),
    ("my_pkg.envs.tiny:MatchSign", None),
])
def test_old_paths_of_podrls_own_env_modules_are_renamed(name, renamed):
    assert renamed_env(name) == renamed


@pytest.mark.timeout(120)
def test_a_users_own_envs_module_keeps_its_name(tmp_path):
    """In a folder with its own envs/tiny.py, `envs.tiny:X` is the user's (a fresh process: the check
    imports the user's `envs` package)."""
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "__init__.py").write_text("")
    (tmp_path / "envs" / "tiny.py").write_text("class MatchSign:\n    pass\n")
    check = ("from podrl.envs.registry import renamed_env; "
             "print(renamed_env('envs.tiny:MatchSign'), renamed_env('envs.cartpole:CartPole'))")
    done = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["None", "podrl.envs.cartpole:CartPole"]  # envs/cartpole.py: not the user's


def saved_with_env(run_dir: Path, env: str) -> None:
    """Hand-edits `run.env` of every checkpoint's saved config in `run_dir` (as an older podrl wrote it)."""
    paths = list((run_dir / "checkpoints").glob("*/config/metadata"))
    assert paths, list(run_dir.rglob("*"))
    for path in paths:
        config = json.loads(path.read_text())
        config["run"]["env"] = env
        path.write_text(json.dumps(config))


@pytest.mark.timeout(600)
def test_a_checkpoint_naming_an_old_module_path_evaluates_and_resumes(tmp_path):
    config = AnakinConfig(env="podrl.envs.tiny:MatchSign", num_envs=8, rollout_length=16, total_steps=8 * 16 * 3,
                          num_devices=1, updates_per_call=1, eval_every=0, eval_episodes=2,
                          logging=LoggingConfig(run_dir=str(tmp_path / "runs"), run_name="old", console=False,
                                                tensorboard=False))
    run_dir = Path(train_anakin(config, PPOConfig(num_minibatches=2)).run_dir)
    saved_with_env(run_dir, "envs.tiny:MatchSign")

    done = subprocess.run([*PODRL, "evaluate", str(run_dir), "--episodes", "2", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["env"] == "podrl.envs.tiny:MatchSign"
    assert done.stderr.count(NOTE) == 1, done.stderr

    resumed = subprocess.run([*PODRL, "anakin", "--resume", str(run_dir), "--total-steps", str(8 * 16 * 5)],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.stderr.count(NOTE) == 1, resumed.stderr  # read three times, said once
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records][-3:] == [8 * 16 * 3, 8 * 16 * 4, 8 * 16 * 5]  # continued, not restarted
    assert json.loads((run_dir / "config.json").read_text())["run"]["env"] == "podrl.envs.tiny:MatchSign"

    saved_with_env(run_dir, "envs.no_such_module:MatchSign")  # not one of podrl's: no renaming, a clear error
    refused = subprocess.run([*PODRL, "evaluate", str(run_dir), "--episodes", "2"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=200)
    assert refused.returncode == 2 and "envs.no_such_module" in refused.stderr, refused.stderr[-3000:]
    assert "note:" not in refused.stderr and "Traceback" not in refused.stderr
