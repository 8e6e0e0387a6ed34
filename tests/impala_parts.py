"""IMPALA's test pieces: a discrete spec, a hand-made trajectory, an agent with its state, a sharded update."""

import jax
import jax.numpy as jnp
import numpy as np
from dm_env import specs

from podrl.agents.impala import ImpalaConfig
from podrl.agents.networks import make_network
from podrl.core.types import Trajectory
from podrl.envs.types import EnvSpec
from podrl.testing import layout_update

OBS, T = 4, 8


DISCRETE = EnvSpec(specs.Array((OBS,), np.float32), specs.DiscreteArray(3))


def _trajectory(agent, params, b, seed=1, log_prob_noise=0.0):
    """A random `[T, b]` trajectory acted by `agent`, with terminations and truncations."""
    keys = jax.random.split(jax.random.key(seed), 7)
    obs = jax.random.normal(keys[0], (T, b, OBS))
    action, extras, _ = jax.vmap(lambda o, k: agent.act(params, (), o, k))(obs, jax.random.split(keys[1], T))
    extras["log_prob"] = extras["log_prob"] + log_prob_noise * jax.random.normal(keys[6], (T, b))
    discount = (jax.random.uniform(keys[2], (T, b)) > 0.1).astype(jnp.float32)
    truncated = (jax.random.uniform(keys[3], (T, b)) > 0.9) & (discount == 1.0)
    next_obs = jnp.concatenate([obs[1:], jax.random.normal(keys[4], (1, b, OBS))])
    next_obs = jnp.where((discount[..., None] == 0) | truncated[..., None], obs + 1.0, next_obs)
    return Trajectory(obs, action, jax.random.uniform(keys[5], (T, b)), discount, truncated, next_obs, extras, ())


def _setup(spec, **overrides):
    config = ImpalaConfig(hidden_sizes=(16, 16), **overrides)
    agent = config.make_agent(spec, total_updates=10)
    state = agent.init(jax.random.key(0), spec)
    network = make_network(spec, config.hidden_sizes, config.activation)
    return config, agent, state, network


def _sharded_update(agent, n):
    """`agent.update` on `n` learner shards as the layouts run it (the metrics averaged by the layout)."""
    return layout_update(agent, jax.devices()[:n])
