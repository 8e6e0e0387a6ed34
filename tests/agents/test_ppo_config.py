"""PPOConfig validation, check_batch and field documentation."""

import ast
import dataclasses
import inspect
import math

import numpy as np
import pytest
from dm_env import specs

from podrl.agents.ppo import PPOConfig
from podrl.core.errors import ConfigError
from podrl.envs.types import EnvSpec


def test_defaults_are_the_classic_cartpole_ppo():
    c = PPOConfig()
    assert (c.learning_rate, c.anneal_lr, c.gamma, c.gae_lambda) == (2.5e-4, True, 0.99, 0.95)
    assert (c.num_epochs, c.num_minibatches, c.clip_eps, c.value_coef, c.entropy_coef) == (4, 4, 0.2, 0.5, 0.01)
    assert (c.max_grad_norm, c.hidden_sizes, c.activation, c.adam_eps) == (0.5, (64, 64), "tanh", 1e-5)
    assert c.normalize_advantages and c.clip_value_loss and c.reward_scale == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.gamma = 0.5


@pytest.mark.parametrize(
    "field,value",
    [
        ("learning_rate", 0.0), ("learning_rate", -1e-3), ("learning_rate", math.nan), ("learning_rate", "fast"),
        ("gamma", 1.01), ("gamma", -0.1), ("gae_lambda", 1.5), ("gae_lambda", math.inf),
        ("num_epochs", 0), ("num_epochs", 2.0), ("num_epochs", True), ("num_minibatches", -1),
        ("clip_eps", 0.0), ("value_coef", -0.5), ("entropy_coef", -0.01), ("max_grad_norm", 0.0),
        ("hidden_sizes", (64, 0)), ("hidden_sizes", (64, -3)), ("hidden_sizes", (64.0,)), ("hidden_sizes", 64),
        ("activation", "sigmoidal"), ("reward_scale", 0.0), ("adam_eps", -1e-8),
        ("anneal_lr", "yes"), ("clip_value_loss", 1), ("normalize_advantages", None),
    ],
)
def test_invalid_field_raises_config_error_naming_it(field, value):
    with pytest.raises(ConfigError) as info:
        PPOConfig(**{field: value})
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: must be")
    assert repr(value) in str(info.value)


def test_edge_values_are_accepted():
    c = PPOConfig(gamma=1.0, gae_lambda=0.0, value_coef=0.0, entropy_coef=0.0, hidden_sizes=[32], activation="relu")
    assert c.hidden_sizes == (32,)  # lists (e.g. from a CLI) become tuples: the config stays hashable
    hash(c)


def test_check_batch():
    c = PPOConfig(num_minibatches=4)
    c.check_batch(rollout_length=128, envs_per_shard=4)
    c.check_batch(rollout_length=2, envs_per_shard=2)
    with pytest.raises(ConfigError) as info:
        PPOConfig(num_minibatches=5).check_batch(rollout_length=128, envs_per_shard=3)
    assert info.value.field == "num_minibatches"
    for number in ("5", "128", "3", "384"):
        assert number in str(info.value)


def test_every_field_has_a_docstring_for_tyro():
    """Also the fields PPOConfig inherits (podrl.agents.config_checks.NetworkConfig)."""
    documented = set()
    for base in PPOConfig.__mro__:
        if not dataclasses.is_dataclass(base):
            continue
        tree = ast.parse(inspect.getsource(inspect.getmodule(base)))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == base.__name__)
        for node, nxt in zip(cls.body, cls.body[1:]):
            if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                assert isinstance(nxt.value.value, str) and nxt.value.value.strip()
                documented.add(node.target.id)
    # every dataclass field is documented (class constants such as SWEEPABLE may be too)
    assert {f.name for f in dataclasses.fields(PPOConfig)} <= documented


def test_make_agent_for_discrete_and_continuous_specs():
    obs = specs.Array((3,), np.float32)
    for action in (specs.DiscreteArray(2), specs.BoundedArray((1,), np.float32, -2.0, 2.0)):
        agent = PPOConfig().make_agent(EnvSpec(obs, action), total_updates=10)
        assert callable(agent.update) and agent.init_actor_state(4) == ()
    with pytest.raises(ValueError, match="total_updates"):
        PPOConfig().make_agent(EnvSpec(obs, specs.DiscreteArray(2)), total_updates=0)


def test_big_models_keep_a_per_leaf_optimizer_small_ones_are_flattened():
    """optax.flatten speeds up small MLPs but slows big ones (Atari frames) 4x; see clipped_flat_optimizer."""
    import jax
    import numpy as np
    from dm_env import specs

    from podrl.agents.actor_critic import count_params
    from podrl.agents.networks import make_network
    from podrl.agents.optimizers import FLATTEN_MAX_PARAMS
    from podrl.envs.types import EnvSpec

    def spec(obs_size):
        return EnvSpec(specs.Array((obs_size,), np.float32), specs.DiscreteArray(2))

    small, big = spec(4), spec(2000)
    config = PPOConfig()
    n_small = count_params(make_network(small, config.hidden_sizes, config.activation), small)
    n_big = count_params(make_network(big, config.hidden_sizes, config.activation), big)
    assert n_small == 2 * (4 * 64 + 64 + 64 * 64 + 64) + (64 * 2 + 2) + (64 + 1)
    assert n_small <= FLATTEN_MAX_PARAMS < n_big
    for env_spec, flat in ((small, True), (big, False)):
        state = config.make_agent(env_spec, 10).init(jax.random.key(0), env_spec)
        mu_leaves = jax.tree.leaves(state.opt_state)
        assert (max(x.ndim for x in mu_leaves) == 1) == flat  # flattened state is all 1-D vectors
