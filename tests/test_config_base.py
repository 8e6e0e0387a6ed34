"""The config pieces the agents share (`agents.config_base`) and the swept-hyperparameter input."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from agents import AGENTS
from agents.actor_critic import hyperparams_for
from agents.impala import ImpalaConfig
from agents.ppo import PPOConfig
from agents.ppo.config import PPOHyperparams
from podrl.errors import ConfigError


def with_sweepable(base, **extra):
    """A subclass of `base` whose SWEEPABLE also lists `extra` ({field: (low, high)})."""
    return type(f"Swept{base.__name__}", (base,), {"SWEEPABLE": {**base.SWEEPABLE, **extra}})


@pytest.mark.parametrize("field", ["num_epochs", "anneal_lr", "activation", "hidden_sizes", "core_size", "no_such"])
def test_a_sweepable_field_that_cannot_be_an_array_fails_at_config_time_naming_it(field):
    """An int / bool / str / tuple field (or none at all) in SWEEPABLE is refused when the config is built."""
    with pytest.raises(ConfigError) as info:
        with_sweepable(PPOConfig, **{field: (0.0, math.inf)})()
    assert info.value.field == field
    assert "SWEEPABLE" in str(info.value)


def test_a_sweepable_float_the_update_never_reads_is_refused():
    """A float field outside HYPERPARAMS would be swept in name only (the loss reads the constant)."""
    with pytest.raises(ConfigError) as info:
        with_sweepable(ImpalaConfig, vtrace_lambda=(0.0, 1.0))()
    assert info.value.field == "vtrace_lambda" and "HYPERPARAMS" in str(info.value)


def test_every_registered_config_passes_its_own_sweepable_check():
    for entry in AGENTS.values():
        config = entry.config()
        fields = getattr(type(config).HYPERPARAMS, "_fields", ())
        assert set(fields) == set(type(config).SWEEPABLE)


def test_hyperparams_are_the_config_floats_or_the_members_arrays():
    config = PPOConfig(clip_eps=0.3)
    hp = hyperparams_for(config)
    assert isinstance(hp, PPOHyperparams) and hp.clip_eps == 0.3 and type(hp.clip_eps) is float
    hp = hyperparams_for(config, {"clip_eps": jnp.float32(0.1)})
    assert isinstance(hp.clip_eps, jnp.ndarray) and np.isclose(hp.clip_eps, 0.1)
    assert hp.gamma == config.gamma  # unswept fields stay the config's Python floats
    with pytest.raises(ValueError, match="num_epochs"):
        hyperparams_for(config, {"num_epochs": jnp.float32(2)})


def test_shared_optimizer_fields_keep_their_names_defaults_and_checks():
    """The fields moved to `agents.config_base`; each agent keeps its own defaults and flag names."""
    from agents.dqn import DQNConfig
    from agents.pqn import PQNConfig

    assert (PPOConfig().learning_rate, PPOConfig().max_grad_norm, PPOConfig().adam_eps) == (2.5e-4, 0.5, 1e-5)
    assert (PQNConfig().learning_rate, PQNConfig().max_grad_norm, PQNConfig().adam_eps) == (5e-4, 10.0, 1e-8)
    assert (DQNConfig().learning_rate, DQNConfig().max_grad_norm, DQNConfig().adam_eps) == (1e-3, 10.0, 1e-8)
    assert (ImpalaConfig().learning_rate, ImpalaConfig().optimizer_eps) == (1e-3, 1e-5)
    for config_type in (PPOConfig, ImpalaConfig, PQNConfig, DQNConfig):
        for field, value in (("learning_rate", 0.0), ("max_grad_norm", -1.0), ("anneal_lr", 1)):
            with pytest.raises(ConfigError) as info:
                config_type(**{field: value})
            assert info.value.field == field
