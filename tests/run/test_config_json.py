"""Configs to JSON and back (resume defaults), and resume checks against older checkpoints."""

from __future__ import annotations

import dataclasses

import pytest

from podrl.agents.impala import ImpalaConfig
from podrl.agents.ppo import PPOConfig
from podrl.anakin.config import AnakinConfig
from podrl.core.errors import ConfigError
from podrl.run.config import CheckpointConfig
from podrl.run.config_json import config_from_json, jsonable, resolved_config
from podrl.run.resume import config_differences
from podrl.sebulba import SebulbaConfig


@pytest.mark.parametrize("config", [
    AnakinConfig(env="Acrobot-v1", num_envs=8, checkpoint=CheckpointConfig(every_updates=5)),
    SebulbaConfig(actor_devices=(0, 1), learner_devices=(2, 3), lag="async"),
    PPOConfig(hidden_sizes=(32, 16), torso="mlp"),
    ImpalaConfig(learning_rate=3e-4),
])
def test_a_config_survives_json(config):
    rebuilt = config_from_json(type(config), jsonable(config))
    assert rebuilt == config and type(rebuilt) is type(config)


def test_an_unknown_saved_field_is_named():
    data = {**jsonable(AnakinConfig()), "checkpoint": {**jsonable(CheckpointConfig()), "bogus": 1}}
    with pytest.raises(ConfigError) as info:
        config_from_json(AnakinConfig, data, "run.")
    assert info.value.field == "run.checkpoint.bogus"


def test_fields_newer_than_a_checkpoint_count_as_their_default():
    current = resolved_config("anakin", AnakinConfig(), PPOConfig())
    defaults = resolved_config("anakin", AnakinConfig(), PPOConfig())
    older = {**current, "agent": {k: v for k, v in current["agent"].items() if k not in ("torso", "shared_torso")}}
    assert config_differences(older, current, defaults) == []
    assert config_differences(older, current) != []  # without defaults the missing fields would differ
    changed = resolved_config("anakin", AnakinConfig(), dataclasses.replace(PPOConfig(), torso="minatar_cnn"))
    assert config_differences(older, changed, defaults) == ["agent.torso (checkpoint: 'mlp', now: 'minatar_cnn')"]
