"""Benchmark agents for the Sebulba actor pipeline: cheap inference on any frame, an optional no-op update.

`PooledConfig(inner, pool, learn)` wraps an agent config (PPO in the benchmarks): the agent it
makes sees every observation average-pooled by `pool` over its spatial axes (ALE's uint8
`[4, 84, 84]` frame stack -> float32 `[4, 14, 14]` at pool 6, which the `mlp` torso takes), so
inference costs a fraction of an Atari env step while the envs, the trajectories (full uint8
frames) and their transport stay what a real run moves. With `learn=False` the update returns
the train state unchanged (no metrics): the learner only consumes rollouts, so the run measures
the actor pipeline alone.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


def pooled_shape(shape: tuple[int, ...], pool: int) -> tuple[int, ...]:
    """`[C, H, W]` -> `[C, H // pool, W // pool]` (rank 3, channels first); other ranks unchanged."""
    if len(shape) != 3 or pool == 1:
        return tuple(shape)
    c, h, w = shape
    return (c, h // pool, w // pool)


def pool_frames(obs, pool: int, shape: tuple[int, ...]):
    """`obs [..., C, H, W]` (uint8 or float) -> float32 `[..., C, H // pool, W // pool]`, mean over each
    `pool x pool` window (uint8 scaled to [0, 1]); other ranks are only cast to float32."""
    import jax.numpy as jnp

    x = obs.astype(jnp.float32) / (255.0 if obs.dtype == jnp.uint8 else 1.0)
    if len(shape) != 3 or pool == 1:
        return x
    c, h, w = pooled_shape(shape, pool)
    lead = x.shape[: x.ndim - 3]
    x = x[..., : h * pool, : w * pool].reshape(*lead, c, h, pool, w, pool)
    return x.mean(axis=(-3, -1))


@dataclasses.dataclass(frozen=True)
class PooledConfig:
    """`inner`'s agent on average-pooled observations; with `learn=False` its update changes nothing."""

    inner: Any
    """The wrapped agent config (e.g. a PPOConfig with the `mlp` torso)."""
    pool: int = 6
    """Spatial average-pooling factor of rank-3 `[C, H, W]` observations (1: none)."""
    learn: bool = True
    """Run the inner agent's update; False: the update returns the train state unchanged."""

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        self.inner.check_batch(rollout_length, envs_per_shard)

    def make_agent(self, env_spec, total_updates: int):
        from dm_env import specs

        from podrl.core.types import Agent
        from podrl.envs.types import EnvSpec

        shape = tuple(env_spec.observation.shape)
        inner_spec = EnvSpec(specs.Array(pooled_shape(shape, self.pool), np.float32, "pooled"), env_spec.action)
        agent = self.inner.make_agent(inner_spec, total_updates)
        pool = lambda obs: pool_frames(obs, self.pool, shape)  # noqa: E731

        def update(train_state, trajectory, key):
            if not self.learn:
                return train_state, {}
            pooled = trajectory._replace(observation=pool(trajectory.observation),
                                         next_observation=pool(trajectory.next_observation))
            return agent.update(train_state, pooled, key)

        return Agent(
            init=lambda key, _spec: agent.init(key, inner_spec),
            init_actor_state=agent.init_actor_state,
            act=lambda params, state, obs, key: agent.act(params, state, pool(obs), key),
            act_greedy=lambda params, state, obs: agent.act_greedy(params, state, pool(obs)),
            update=update,
        )
