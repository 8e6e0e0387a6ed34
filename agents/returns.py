"""Return and advantage estimators, pure and single-sequence (rlax style).

Functions take one time-major sequence `[T]`; batch them with `jax.vmap` at the
call site, or use the `batched_*` forms over `[T, B]`.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array


def gae(
    reward: Array,
    discount: Array,
    episode_end: Array,
    value: Array,
    next_value: Array,
    gamma: float,
    lambda_: float,
) -> tuple[Array, Array]:
    """Generalized advantage estimation over one sequence.

    See "High-Dimensional Continuous Control Using Generalized Advantage
    Estimation" by Schulman, Moritz, Levine, Jordan and Abbeel (ICLR 2016),
    https://arxiv.org/abs/1506.02438.

        delta_t = r_t + gamma * discount_t * next_value_t - value_t
        A_t     = delta_t + gamma * lambda_ * (1 - episode_end_t) * A_{t+1},  A_T = 0

    A terminated step has `discount_t = 0` (no bootstrap). A truncated step has
    `discount_t = 1`, bootstraps from `next_value_t` (the value of the true final
    observation) and, like a termination, stops the recursion (`episode_end_t`).

    Args:
      reward: `[T]` r_t, the reward for the action taken at t.
      discount: `[T]` 0 where the episode terminated after step t, else 1.
      episode_end: `[T]` bool or 0/1, the episode ended (terminated or truncated)
        after step t.
      value: `[T]` V(o_t).
      next_value: `[T]` V(o_{t+1}), o_{t+1} taken before any auto-reset.
      gamma: discount factor.
      lambda_: GAE mixing parameter (0: one-step TD, 1: Monte Carlo).

    Returns:
      `(advantage [T], target [T])` with `target = advantage + value`, the
      lambda-return regression target of the critic.
    """
    chex.assert_rank([reward, discount, episode_end, value, next_value], 1)
    chex.assert_equal_shape([reward, discount, episode_end, value, next_value])
    chex.assert_type([reward, discount, value, next_value], float)

    delta = reward + gamma * discount * next_value - value
    decay = (gamma * lambda_) * (1.0 - episode_end.astype(delta.dtype))

    def backward(advantage_tp1, delta_and_decay):
        delta_t, decay_t = delta_and_decay
        advantage_t = delta_t + decay_t * advantage_tp1
        return advantage_t, advantage_t

    _, advantage = lax.scan(backward, jnp.zeros_like(delta[0]), (delta, decay), reverse=True)
    return advantage, advantage + value


_gae_over_batch = jax.vmap(gae, in_axes=(1, 1, 1, 1, 1, None, None), out_axes=1)


def batched_gae(
    reward: Array,
    discount: Array,
    episode_end: Array,
    value: Array,
    next_value: Array,
    gamma: float,
    lambda_: float,
) -> tuple[Array, Array]:
    """`gae` over a time-major batch: every argument is `[T, B]`; returns `[T, B]` twice."""
    chex.assert_rank([reward, discount, episode_end, value, next_value], 2)
    chex.assert_equal_shape([reward, discount, episode_end, value, next_value])
    return _gae_over_batch(reward, discount, episode_end, value, next_value, gamma, lambda_)
