"""MuZero's targets as pure functions, single-sequence first (rlax style).

- h and h^-1 (`podrl.agents.value_rescaling`, Pohlen et al. 2018; MuZero Appendix F) squash returns and
  rewards before they are projected on a categorical support;
- `scalar_to_two_hot` / `two_hot_to_scalar`: a scalar as a distribution over the integer support
  `[-S, S]` (the two neighbouring atoms weighted by proximity) and back (the expectation);
- `window_targets`: for one replayed window of `L = K + n` steps, the K-step unroll's reward,
  value and policy targets, with states past an episode end absorbing (zero reward, zero value,
  uniform policy), the value targets n-step returns bootstrapped from a network's values.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp

from podrl.agents.replay import n_step_targets
from podrl.agents.value_rescaling import inverse_value_transform, value_transform

Array = jax.Array


def scalar_to_two_hot(x: Array, support_size: int) -> Array:
    """`[...]` scalars -> `[..., 2S + 1]` probabilities on the atoms -S, ..., S (S = `support_size`):
    x clipped to [-S, S] puts weight ceil(x) - x on floor(x) and the rest on floor(x) + 1."""
    x = jnp.clip(x, -support_size, support_size)
    low = jnp.floor(x)
    upper_weight = x - low
    index = (low + support_size).astype(jnp.int32)
    atoms = 2 * support_size + 1
    lower = jax.nn.one_hot(index, atoms) * (1.0 - upper_weight)[..., None]
    upper = jax.nn.one_hot(jnp.minimum(index + 1, atoms - 1), atoms) * upper_weight[..., None]
    return lower + upper


def two_hot_to_scalar(probs: Array, support_size: int) -> Array:
    """`[..., 2S + 1]` probabilities -> `[...]` their expectation over the atoms -S, ..., S."""
    atoms = jnp.arange(-support_size, support_size + 1, dtype=jnp.float32)
    return jnp.sum(probs * atoms, axis=-1)


def logits_to_scalar(logits: Array, support_size: int) -> Array:
    """`[..., 2S + 1]` logits over h-transformed atoms -> `[...]` scalars: h^-1 of the expectation."""
    return inverse_value_transform(two_hot_to_scalar(jax.nn.softmax(logits, axis=-1), support_size))


def scalar_to_target(x: Array, support_size: int) -> Array:
    """`[...]` scalar targets -> `[..., 2S + 1]` categorical targets: the two-hot of h(x)."""
    return scalar_to_two_hot(value_transform(x), support_size)


class WindowTargets(NamedTuple):
    """The targets of one window's K-step unroll (K = `unroll_steps`).

    Attributes:
      reward: float32 `[K]`, u_k for the model's reward after its k-th action (k = 1..K): r_{k-1}
        while the episode lasts, 0 after it ended.
      value: float32 `[K + 1]`, z_k for the state k steps in: the n-step return bootstrapped from
        the given values, 0 for a state past an episode end.
      policy: float32 `[K + 1, A]`, the search policy stored at step k, uniform past an episode end.
      alive: bool `[K + 1]`, the state k steps in belongs to the window's first episode.
    """

    reward: Array
    value: Array
    policy: Array
    alive: Array


def window_targets(r_t: Array, discount_t: Array, episode_end_t: Array, policy_t: Array, bootstrap_value_t: Array,
                   unroll_steps: int, td_steps: int, gamma: float) -> WindowTargets:
    """MuZero's targets (Schrittwieser et al. 2020, Appendix G) of one window of L = K + n steps.

    Args:
      r_t: `[L]` rewards r_{t+1} for the action at t.
      discount_t: `[L]` env discounts (0 where the episode terminated at t+1).
      episode_end_t: `[L]` bool, the episode ended (terminated or truncated) at t+1.
      policy_t: `[L, A]` the search policies (visit distributions) the actor stored at t.
      bootstrap_value_t: `[L]` v(o'_{t+1}): a network's value of the observation after step t
        (before any reset), used where the n-step return of some k stops at step t.
      unroll_steps: K; td_steps: n (L must be K + n); gamma: the discount.
    """
    size = r_t.shape[0]
    chex.assert_shape([r_t, discount_t, episode_end_t, bootstrap_value_t], (size,))
    if size != unroll_steps + td_steps:
        raise ValueError(f"a window of {size} steps, expected unroll_steps + td_steps = {unroll_steps + td_steps}")
    ret, weight, last = n_step_targets(r_t, discount_t, episode_end_t, td_steps, gamma)
    value = ret + weight * bootstrap_value_t[last]
    ended_before = jnp.cumsum(episode_end_t.astype(jnp.int32)) - episode_end_t.astype(jnp.int32)
    alive = ended_before[: unroll_steps + 1] == 0
    uniform = jnp.full_like(policy_t[0], 1.0 / policy_t.shape[-1])
    return WindowTargets(
        reward=jnp.where(alive[:-1], r_t[:unroll_steps], 0.0),
        value=jnp.where(alive, value[: unroll_steps + 1], 0.0),
        policy=jnp.where(alive[:, None], policy_t[: unroll_steps + 1], uniform),
        alive=alive)
