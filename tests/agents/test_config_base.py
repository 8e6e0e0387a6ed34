"""The config pieces the agents share (`podrl.agents.config_base`) and the swept-hyperparameter input."""

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
import pytest

from podrl.agents import AGENTS
from podrl.agents.actor_critic import hyperparams_for
from podrl.agents.impala import ImpalaConfig
from podrl.agents.ppo import PPOConfig
from podrl.agents.ppo.config import PPOHyperparams
from podrl.core.errors import ConfigError


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
    """The fields moved to `podrl.agents.config_base`; each agent keeps its own defaults and flag names."""
    from podrl.agents.dqn import DQNConfig
    from podrl.agents.pqn import PQNConfig

    assert (PPOConfig().learning_rate, PPOConfig().max_grad_norm, PPOConfig().adam_eps) == (2.5e-4, 0.5, 1e-5)
    assert (PQNConfig().learning_rate, PQNConfig().max_grad_norm, PQNConfig().adam_eps) == (5e-4, 10.0, 1e-8)
    assert (DQNConfig().learning_rate, DQNConfig().max_grad_norm, DQNConfig().adam_eps) == (1e-3, 10.0, 1e-8)
    assert (ImpalaConfig().learning_rate, ImpalaConfig().optimizer_eps) == (1e-3, 1e-5)
    for config_type in (PPOConfig, ImpalaConfig, PQNConfig, DQNConfig):
        for field, value in (("learning_rate", 0.0), ("max_grad_norm", -1.0), ("anneal_lr", 1)):
            with pytest.raises(ConfigError) as info:
                config_type(**{field: value})
            assert info.value.field == field


def test_every_registered_config_builds_its_agent_through_agent_config_base():
    """No agent writes its own `make_agent` trampoline: each names its module in AGENT_MODULE."""
    import importlib

    from podrl.agents.config_base import AgentConfigBase

    for name, entry in AGENTS.items():
        assert issubclass(entry.config, AgentConfigBase), name
        assert "make_agent" not in vars(entry.config), name
        assert callable(importlib.import_module(entry.config.AGENT_MODULE).make_agent), name


def test_replay_agents_share_the_replay_fields_and_checks_with_their_own_defaults():
    """DQN, SAC and TD3 take the replay fields, `sgd_steps`, `check_batch` and the fill / adam_eps
    checks from `podrl.agents.config_checks` / `podrl.agents.config_base`, each keeping its defaults."""
    from podrl.agents.config_base import AdamEpsConfig
    from podrl.agents.config_checks import ReplayConfig
    from podrl.agents.dqn import DQNConfig
    from podrl.agents.sac.config import SACConfig
    from podrl.agents.td3.config import TD3Config

    dqn = DQNConfig()
    assert (dqn.buffer_size, dqn.batch_size, dqn.replay_ratio, dqn.min_fill) == (50_000, 128, 0.25, 1_000)
    assert (SACConfig().buffer_size, SACConfig().batch_size, SACConfig().warmup_steps) == (1_000_000, 256, 5_000)
    assert (TD3Config().critic_learning_rate, TD3Config().warmup_steps, TD3Config().adam_eps) == (3e-4, 25_000, 1e-8)
    fill = {DQNConfig: "min_fill", SACConfig: "warmup_steps", TD3Config: "warmup_steps"}
    for config_type, fill_field in fill.items():
        assert issubclass(config_type, ReplayConfig) and issubclass(config_type, AdamEpsConfig)
        # DQN extends the shared check (super(), then --agent.prioritised's row layout: test_dqn's refusals);
        # SAC and TD3 declare none: AgentConfigBase's hands the batch on to ReplayConfig's
        assert "check_batch" not in vars(config_type) or config_type is DQNConfig
        assert config_type.memory_field == "buffer_size"
        assert config_type.sgd_steps is ReplayConfig.sgd_steps and config_type(replay_ratio=0.5).sgd_steps(4, 3) == 6
        cases = (("buffer_size", 0), ("batch_size", 1.5), ("replay_ratio", 0.0), ("adam_eps", 0.0), (fill_field, -1))
        for field, value in cases + ((fill_field, 101),):
            with pytest.raises(ConfigError) as info:
                config_type(**{"buffer_size": 100, fill_field: 0, field: value})
            assert info.value.field == field
        with pytest.raises(ConfigError, match="buffer_size"):
            config_type(buffer_size=100, **{fill_field: 0}).check_batch(rollout_length=11, envs_per_shard=10)


def config_parts() -> list[type]:
    """Every shared config part (the `CheckedConfig` subclasses of podrl.agents' shared modules), from the code."""
    from podrl.agents import config_base, config_checks, reward_clip
    from podrl.agents.config_base import AgentConfigBase, CheckedConfig

    found = {v for m in (config_base, config_checks, reward_clip) for v in vars(m).values()
             if isinstance(v, type) and issubclass(v, CheckedConfig) and v.__module__ == m.__name__}
    return sorted(found - {CheckedConfig, AgentConfigBase}, key=lambda c: c.__name__)


def bad_value(annotation: str):
    """A value of the wrong kind for a field annotated `annotation` (each part's check must refuse it)."""
    for kind, value in (("tuple", ("x",)), ("bool", 1), ("float", float("nan")), ("int", -1), ("str", "no-such")):
        if annotation.startswith(kind):
            return value
    raise AssertionError(f"no bad value for {annotation}")


@pytest.mark.parametrize("part", config_parts(), ids=lambda c: c.__name__)
def test_each_config_part_checks_its_own_fields_on_its_own(part):
    """Built alone (no agent config around it), a part refuses a bad value of each of its fields, naming
    it: the check lives in the part's own `__post_init__`, so a user's config inheriting it gets it."""
    fields = dataclasses.fields(part)
    assert fields, part
    for field in fields:
        with pytest.raises(ConfigError) as info:
            part(**{field.name: bad_value(str(field.type))})
        assert info.value.field == field.name, (part.__name__, field.name)


def test_a_users_config_gets_the_parts_checks_and_an_optimizer_without_epochs():
    """A config of AgentConfigBase + AdamConfig and its own field: the parts' checks, then its own (after
    `super().__post_init__()`), and `make_optimizer` anneals over one optimizer step per update."""
    from podrl.agents.config_base import AdamConfig, AgentConfigBase
    from podrl.agents.optimizers import make_optimizer
    from podrl.core.errors import require_number

    @dataclasses.dataclass(frozen=True)
    class MyConfig(AgentConfigBase, AdamConfig):
        value_coef: float = 0.5
        """Weight of the value loss."""

        def __post_init__(self):
            super().__post_init__()
            require_number(self, "value_coef", low=0.0)

    for field, value in (("learning_rate", 0.0), ("max_grad_norm", -1.0), ("anneal_lr", 1), ("adam_eps", 0.0),
                         ("value_coef", -1.0)):
        with pytest.raises(ConfigError) as info:
            MyConfig(**{field: value})
        assert info.value.field == field
    MyConfig().check_batch(rollout_length=5, envs_per_shard=3)  # AgentConfigBase's: any batch
    _, schedule = make_optimizer(MyConfig(learning_rate=0.1), total_updates=10)
    assert [float(schedule(step)) for step in (0, 5, 10)] == pytest.approx([0.1, 0.05, 0.0])
