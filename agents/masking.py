"""Legal-action masks: the one home of the masking math every discrete agent uses.

The mask is the observation's `action_mask` leaf (`podrl.envs.observations.action_mask`: bool
`[..., A]`, True where legal; None for an env without one, and then every function here is the
unmasked operation it replaces, op for op, so programs without a mask do not change):

- `masked_logits`: illegal logits set to `MASKED_LOGIT`, so a softmax gives them probability 0
  exactly; sampling, the mode, log-probabilities, the ratio and the entropy of the categorical then
  cover legal actions only (PPO, IMPALA: acting, loss, ratio, entropy);
- `masked_argmax`: the best legal action (greedy acting, Double-DQN / R2D2 bootstrap selection);
- `masked_max`: the value of the best legal action (PQN's Q(lambda) bootstrap); 0 where no action is
  legal (Jumanji's terminal observations have all-False masks; a terminated step's bootstrap is
  discounted to 0 anyway, and a finite value keeps the loss finite);
- `epsilon_greedy`: the masked argmax, or with probability epsilon a uniformly random legal action
  (PQN, DQN, R2D2 acting);
- `invalid_actions`: the complement, as mctx takes it at the search root (MuZero).

An all-False mask on an observation an agent acts on is the env's error: the layouts count such steps
where they count NaN rewards (`podrl.core.finite`) and stop the run naming the env and the update.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from podrl.envs.observations import action_mask

Array = jax.Array

MASKED_LOGIT = -1e9
"""The logit of an illegal action: finite (no NaN in `p log p`), and exp(-1e9 - max) is exactly 0 in float32."""

__all__ = ["MASKED_LOGIT", "action_mask", "masked_logits", "masked_argmax", "masked_max", "epsilon_greedy",
           "invalid_actions", "select_value"]


def masked_logits(logits: Array, mask: Array | None) -> Array:
    """`logits [..., A]` with illegal actions (`mask [..., A]` False) at `MASKED_LOGIT`."""
    if mask is None:
        return logits
    return jnp.where(mask, logits, jnp.asarray(MASKED_LOGIT, logits.dtype))


def masked_argmax(q: Array, mask: Array | None) -> Array:
    """int32 `[...]`: argmax over the legal actions of `q [..., A]` (all actions without a mask; action 0
    where none is legal)."""
    if mask is None:
        return jnp.argmax(q, axis=-1).astype(jnp.int32)
    return jnp.argmax(jnp.where(mask, q, -jnp.inf), axis=-1).astype(jnp.int32)


def masked_max(q: Array, mask: Array | None) -> Array:
    """`[...]`: max over the legal actions of `q [..., A]`; 0 where no action is legal (module docstring)."""
    if mask is None:
        return jnp.max(q, axis=-1)
    best = jnp.max(jnp.where(mask, q, -jnp.inf), axis=-1)
    return jnp.where(jnp.any(mask, axis=-1), best, jnp.zeros_like(best))


def select_value(q_value: Array, q_selector: Array, mask: Array | None) -> Array:
    """`[...]`: `q_value [..., A]` at the legal action `q_selector [..., A]` ranks best (double Q; the max
    when they are the same array); 0 where no action is legal."""
    best = masked_argmax(q_selector, mask)
    value = jnp.take_along_axis(q_value, best[..., None], axis=-1)[..., 0]
    if mask is None:
        return value
    return jnp.where(jnp.any(mask, axis=-1), value, jnp.zeros_like(value))


def epsilon_greedy(key: Array, q: Array, epsilon: Array, mask: Array | None = None) -> Array:
    """int32 actions `[B]` from Q values `[B, A]`: with probability `epsilon` (`[]` or `[B]`) a uniformly
    random legal action, else the best legal one (`masked_argmax`)."""
    explore_key, action_key = jax.random.split(key)
    greedy = masked_argmax(q, mask)
    if mask is None:
        random = jax.random.randint(action_key, greedy.shape, 0, q.shape[-1], dtype=jnp.int32)
    else:
        random = jax.random.categorical(action_key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)
    explore = jax.random.uniform(explore_key, greedy.shape) < epsilon
    return jnp.where(explore, random, greedy)


def invalid_actions(mask: Array | None) -> Array | None:
    """mctx's `invalid_actions` `[B, A]` (True: illegal) of a mask; None without one."""
    return None if mask is None else ~mask
