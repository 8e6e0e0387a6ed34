"""Invalid configs fail before anything compiles, with a message naming the field."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

import podrl.anakin.setup
from podrl.agents.impala import ImpalaConfig
from podrl.agents.ppo import PPOConfig
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.core.errors import ConfigError
from podrl.run.config import LoggingConfig

ROOT = Path(__file__).resolve().parents[2]
QUIET = LoggingConfig(run_dir=None, console=False)


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(num_envs=0), "num_envs"),
        (dict(num_envs=-4), "num_envs"),
        (dict(rollout_length=0), "rollout_length"),
        (dict(total_steps=0), "total_steps"),
        (dict(total_steps=100), "total_steps"),  # less than one update of 4 x 128
        (dict(num_seeds=0), "num_seeds"),
        (dict(updates_per_call=0), "updates_per_call"),
        (dict(eval_episodes=-1), "eval_episodes"),  # 0 is no evaluation
        (dict(eval_every=-1), "eval_every"),
        (dict(num_devices=0), "num_devices"),
        (dict(seed=-1), "seed"),
        (dict(num_envs=2.5), "num_envs"),
        (dict(env="NoSuchEnv-v9"), "env"),
        (dict(env="no_such_module:Env"), "env"),
        (dict(env="podrl.envs.tiny:NoSuchClass"), "env"),
    ],
)
def test_invalid_run_field_is_named(overrides, field):
    with pytest.raises(ConfigError) as info:
        AnakinConfig(**overrides)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")


@pytest.mark.parametrize(
    "run, ppo, field, words",
    [
        (dict(num_envs=6, num_devices=4), {}, "num_envs", "4 devices"),
        (dict(num_envs=4, rollout_length=5, num_devices=2), dict(num_minibatches=4), "num_minibatches", "10"),
        (dict(num_devices=64), {}, "num_devices", "64"),
    ],
)
def test_layout_errors_raise_before_compiling(monkeypatch, cpu_devices, run, ppo, field, words):
    def no_program(*args, **kwargs):
        raise AssertionError("the program was built although the config is invalid")

    monkeypatch.setattr(podrl.anakin.setup, "AnakinCompiled", no_program)  # built before the run (setup.py)
    config = AnakinConfig(logging=QUIET, **run)
    with pytest.raises(ConfigError) as info:
        train_anakin(config, PPOConfig(**ppo))
    assert info.value.field == field
    assert words in str(info.value)


def test_configs_are_frozen():
    config = AnakinConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_envs = 8  # type: ignore[misc]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "train_anakin.py"), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "300"})


def test_cli_help_lists_every_field_with_its_doc():
    out = _cli("--help").stdout
    for name in ("--env", "--seed", "--num-seeds", "--total-steps", "--num-envs", "--num-devices",
                 "--rollout-length", "--cpu-devices", "--logging.run-dir", "agent:ppo", "agent:impala"):
        assert name in out, name
    assert "Environments per seed, split evenly over the devices." in out
    ppo_help = _cli("agent:ppo", "--help").stdout
    for field in dataclasses.fields(PPOConfig):
        assert "--agent." + field.name.replace("_", "-") in ppo_help, field.name
    assert "Discount factor, in [0, 1]." in ppo_help
    impala_help = _cli("agent:impala", "--help").stdout
    for field in dataclasses.fields(ImpalaConfig):
        assert "--agent." + field.name.replace("_", "-") in impala_help, field.name


def test_cli_rejects_bad_values_naming_the_field():
    result = _cli("--num-envs", "0")
    assert result.returncode == 2
    assert "num_envs: must be a positive integer" in result.stderr
    result = _cli("--env", "Nope-v0")
    assert result.returncode == 2 and "env: unknown env 'Nope-v0'" in result.stderr
    result = _cli("--cpu-devices", "3", "--num-envs", "4")
    assert result.returncode == 2 and "num_envs" in result.stderr and "3 devices" in result.stderr
