"""Functional wrappers: time limit, episode statistics and auto-reset.

`podrl.envs.make` adds the time limit; the layouts then stack
``AutoReset(EpisodeStats(env))`` (`wrap_for_training`). Each wrapper keeps its own fields next to the
inner state and always returns the same `extras` keys, so wrapped envs scan.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from podrl.envs.types import LAST, Array, EnvState, JaxEnv, PRNGKey, TimeStep
from podrl.envs.varying import vary_over, varying_axes


class Wrapper:
    """Forwards everything to `env`; subclasses override reset/step."""

    def __init__(self, env: JaxEnv):
        self.env = env

    def reset(self, key: PRNGKey) -> tuple[EnvState, TimeStep]:
        return self.env.reset(key)

    def step(self, state: EnvState, action: Array) -> tuple[EnvState, TimeStep]:
        return self.env.step(state, action)

    def observation_spec(self):
        return self.env.observation_spec()

    def action_spec(self):
        return self.env.action_spec()

    @property
    def unwrapped(self) -> JaxEnv:
        return getattr(self.env, "unwrapped", self.env)

    def __getattr__(self, name: str) -> Any:
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


class TimeLimitState(NamedTuple):
    inner: EnvState
    elapsed: Array  # int32 [], steps taken in this episode


class TimeLimit(Wrapper):
    """Ends an episode after `max_steps` steps as a *truncation*.

    A truncated step is LAST with discount 1 and `extras["truncated"] = True`.
    If the env terminates on that very step, termination wins (discount 0,
    truncated False), as in gymnasium where `terminated` takes precedence for
    bootstrapping.
    """

    def __init__(self, env: JaxEnv, max_steps: int):
        super().__init__(env)
        if max_steps <= 0:
            raise ValueError(f"max_steps must be positive, got {max_steps}")
        self.max_steps = int(max_steps)

    def reset(self, key):
        inner, ts = self.env.reset(key)
        ts = ts._replace(extras={**ts.extras, "truncated": jnp.asarray(False)})
        return TimeLimitState(inner, jnp.asarray(0, jnp.int32)), ts

    def step(self, state: TimeLimitState, action):
        inner, ts = self.env.step(state.inner, action)
        elapsed = state.elapsed + 1
        # An inner truncation (e.g. a nested TimeLimit) stays a truncation.
        inner_truncated = ts.extras.get("truncated", jnp.asarray(False))
        truncated = inner_truncated | ((elapsed >= self.max_steps) & ~ts.last())
        step_type = jnp.where(truncated, LAST, ts.step_type).astype(jnp.int32)
        ts = ts._replace(step_type=step_type, extras={**ts.extras, "truncated": truncated})
        return TimeLimitState(inner, elapsed), ts


class EpisodeStatsState(NamedTuple):
    inner: EnvState
    episode_return: Array  # float32 [], return so far in this episode
    episode_length: Array  # int32 [], steps so far in this episode


class EpisodeStats(Wrapper):
    """Adds `episode_return` and `episode_length` to extras.

    Both hold the running totals including this step; they are the finished
    episode's totals where `step_type == LAST`.
    """

    def reset(self, key):
        inner, ts = self.env.reset(key)
        zero_r, zero_l = jnp.asarray(0.0, jnp.float32), jnp.asarray(0, jnp.int32)
        extras = {**ts.extras, "episode_return": zero_r, "episode_length": zero_l}
        return EpisodeStatsState(inner, zero_r, zero_l), ts._replace(extras=extras)

    def step(self, state: EpisodeStatsState, action):
        inner, ts = self.env.step(state.inner, action)
        ret = state.episode_return + ts.reward.astype(jnp.float32)
        length = state.episode_length + 1
        extras = {**ts.extras, "episode_return": ret, "episode_length": length}
        return EpisodeStatsState(inner, ret, length), ts._replace(extras=extras)


class AutoResetState(NamedTuple):
    inner: EnvState
    key: PRNGKey  # consumed to reset the inner env when an episode ends


class AutoReset(Wrapper):
    """Resets the env in the same `step` call that ends an episode.

    On a LAST step the returned timestep keeps the final step's `step_type`
    (LAST), `reward`, `discount` and `extras` (e.g. `truncated`,
    `episode_return`), but its `observation` is the first observation of the
    next episode, ready for the next action. The observation the action led to
    is always in `extras["next_obs"]` (on every step, so it can bootstrap a
    truncated episode). The FIRST timestep of the new episode is never emitted.
    """

    def reset(self, key):
        key, reset_key = jax.random.split(key)
        inner, ts = self.env.reset(reset_key)
        ts = ts._replace(extras={**ts.extras, "next_obs": ts.observation})
        return AutoResetState(inner, key), ts

    def step(self, state: AutoResetState, action):
        inner, ts = self.env.step(state.inner, action)
        key, reset_key = jax.random.split(state.key)
        reset_inner, reset_ts = self.env.reset(reset_key)
        done = ts.last()
        inner = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_inner, inner)
        observation = jax.tree.map(lambda r, o: jnp.where(done, r, o), reset_ts.observation, ts.observation)
        extras = {**ts.extras, "next_obs": ts.observation}
        return AutoResetState(inner, key), ts._replace(observation=observation, extras=extras)

    def step_batch(self, state: AutoResetState, action):
        """`jax.vmap(self.step)` over a leading batch axis `[B]`, value for value, except that
        the inner env's resets are computed only on steps where some episode of the batch
        ends (one `lax.cond` for the batch). Most steps of a small batch end no episode, and
        a reset's random draws can cost as much as the step itself (CartPole's `uniform` is a
        rolled threefry loop on CPU). The keys advance on every step exactly as in `step`.
        Under an outer `vmap` the cond becomes a select and both branches run, as in `step`
        (Anakin runs a device's single member unbatched for this reason)."""
        inner, ts = jax.vmap(self.env.step)(state.inner, action)
        key, reset_key = jnp.moveaxis(jax.vmap(jax.random.split)(state.key), 1, 0)
        done = ts.last()

        def select(new, old):
            return jnp.where(jnp.reshape(done, done.shape + (1,) * (old.ndim - done.ndim)), new, old)

        # inside a layout's shard_map both branches must vary over the same mesh axes: those of the
        # episode ends, the reset keys and the values kept (a reset may vary where the step did not)
        axes = varying_axes(done) | varying_axes(jax.random.key_data(reset_key))

        def with_resets(inner, observation):
            reset_inner, reset_ts = jax.vmap(self.env.reset)(reset_key)
            kept = jax.tree.map(select, reset_inner, inner), jax.tree.map(select, reset_ts.observation, observation)
            return vary_over(kept, axes)

        def without_resets(inner, observation):
            return vary_over((inner, observation), axes)

        inner, observation = jax.lax.cond(jnp.any(done), with_resets, without_resets, inner, ts.observation)
        extras = {**ts.extras, "next_obs": ts.observation}
        return AutoResetState(inner, key), ts._replace(observation=observation, extras=extras)


def batch_step(env: JaxEnv):
    """`env.step` over a leading batch axis: the env's own `step_batch` where it has one
    (`AutoReset`), else `jax.vmap(env.step)`."""
    step_batch = getattr(type(env), "step_batch", None)  # the class's own: not one a wrapper forwards to
    return functools.partial(step_batch, env) if step_batch else jax.vmap(env.step)


def wrap_for_training(env: JaxEnv) -> JaxEnv:
    """The stack the layouts run: auto-reset over episode statistics.

    Time limits come with the env itself (`podrl.envs.make` adds gymnasium's).
    """
    return AutoReset(EpisodeStats(env))
