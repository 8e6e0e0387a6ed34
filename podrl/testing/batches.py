"""Small `[T, B]` trajectories to check an agent with, made by the agent's own `act`.

Observations are drawn from the env's spec (`sample_observations`: uniform within a bounded spec,
standard normal for other floats, bits for bools; an `action_mask`-named spec is all legal) or
taken from a JAX env's resets; the agent acts on them with its own `act`, carrying its actor state
and resetting rows where an episode ended as the layouts do; rewards, terminations and
truncations are random. Nothing here steps an env: the agent, not the env, is under test.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from dm_env import specs

from podrl.core.errors import ConfigError
from podrl.core.types import Agent, Trajectory, env_columns, reset_finished_actor_state
from podrl.envs.types import EnvSpec, JaxEnv

ENV_COUNTS = (2, 4, 8, 16, 32, 64)
"""Envs per shard tried by `tiny_envs`, smallest first (2 at least: rows must differ)."""


def tiny_envs(agent_config: Any, rollout_length: int) -> int:
    """The fewest envs per shard (of `ENV_COUNTS`) whose `[rollout_length, B]` batch the config's
    `check_batch` accepts; ConfigError("num_envs") naming them when none is."""
    errors = []
    for count in ENV_COUNTS:
        try:
            agent_config.check_batch(rollout_length, count)
            return count
        except ConfigError as e:
            errors.append(str(e))
    raise ConfigError("num_envs", f"{type(agent_config).__name__}.check_batch refuses {rollout_length} steps of "
                                  f"each of {ENV_COUNTS} envs per shard (last: {errors[-1]}); give num_envs")


def sample_observations(spec: specs.Array, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """`shape + spec.shape` observations of `spec`'s dtype drawn from it (module doc)."""
    full = tuple(shape) + tuple(spec.shape)
    dtype = np.dtype(spec.dtype)
    if spec.name == "action_mask" or dtype == np.bool_:
        return jnp.ones(full, bool) if spec.name == "action_mask" else jax.random.bernoulli(key, 0.5, full)
    if isinstance(spec, specs.BoundedArray):
        low = np.broadcast_to(np.where(np.isfinite(spec.minimum), spec.minimum, -1.0), spec.shape)
        high = np.broadcast_to(np.where(np.isfinite(spec.maximum), spec.maximum, 1.0), spec.shape)
        if np.issubdtype(dtype, np.integer):
            return jax.random.randint(key, full, low, high + 1).astype(dtype)
        return jax.random.uniform(key, full, jnp.float32, low, high).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return jax.random.randint(key, full, 0, 2).astype(dtype)
    return jax.random.normal(key, full, jnp.float32).astype(dtype)


def env_observations(env: JaxEnv, key: jax.Array, count: int) -> jax.Array:
    """`[count, *obs]` observations of `count` resets of the JAX `env` (with keys split from `key`)."""
    return jax.vmap(lambda k: env.reset(k)[1].observation)(jax.random.split(key, count))


class TrajectoryMaker:
    """`maker(params, key) -> Trajectory [length, envs]` of `agent` acting with `params` (module doc):
    observations from `env`'s resets when given, else drawn from `env_spec`. Where `discount` is 0 or
    `truncated`, the episode ended and the next step's actor state is the agent's initial one (as in
    the layouts). Its programs (the inputs' draw, one `act` step: `self.act`) compile once, on first use."""

    def __init__(self, agent: Agent, env_spec: EnvSpec, length: int, envs: int, env: JaxEnv | None = None):
        self.agent, self.envs, self.length = agent, envs, length
        self.act = jax.jit(agent.act)
        self._draw = jax.jit(functools.partial(_draw, env_spec, length, envs, env))

    def __call__(self, params: Any, key: jax.Array) -> Trajectory:
        observations, discount, truncated, reward, act_key = self._draw(key)
        start = self.agent.init_actor_state(self.envs, env_columns(0, self.envs, self.envs))
        ended, state, steps = (discount == 0.0) | truncated, start, []
        for t, step_key in enumerate(jax.random.split(act_key, self.length)):
            action, extras, state = self.act(params, state, observations[t], step_key)
            state = reset_finished_actor_state(state, ended[t], start)
            steps.append((action, extras))
        actions, extras = jax.tree.map(lambda *xs: jnp.stack(xs), *steps)
        return Trajectory(observations[:-1], actions, reward, discount, truncated, observations[1:], extras, start)


def _draw(env_spec: EnvSpec, length: int, envs: int, env: JaxEnv | None, key: jax.Array):
    """`(observations [T + 1, B, *obs], discount, truncated, reward [T, B], key to act with)`."""
    keys = jax.random.split(key, 5)
    if env is not None:
        observations = env_observations(env, keys[0], (length + 1) * envs).reshape(
            (length + 1, envs) + tuple(env_spec.observation.shape))
    else:
        observations = sample_observations(env_spec.observation, keys[0], (length + 1, envs))
    discount = (jax.random.uniform(keys[1], (length, envs)) > 0.2).astype(jnp.float32)
    truncated = (jax.random.uniform(keys[2], (length, envs)) > 0.85) & (discount == 1.0)
    return observations, discount, truncated, jax.random.normal(keys[3], (length, envs), jnp.float32), keys[4]


def tiled(trajectory: Trajectory, copies: int) -> Trajectory:
    """`trajectory` `[T, B]` repeated `copies` times along the batch axis: `[T, copies * B]` (actor state
    `[copies * B, ...]`), so each of `copies` learner shards holds the same batch."""
    steps = jax.tree.map(lambda x: jnp.concatenate([x] * copies, axis=1), trajectory._replace(actor_state=()))
    start = jax.tree.map(lambda x: jnp.concatenate([x] * copies, axis=0), trajectory.actor_state)
    return steps._replace(actor_state=start)
