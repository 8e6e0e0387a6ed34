"""TD3's math, single transition first (batch with `jax.vmap` at the call site), rlax-style.

Fujimoto, van Hoof & Meger 2018 ("Addressing Function Approximation Error in Actor-Critic
Methods", arXiv:1802.09477), in the normalized action box [-1, 1]^A:

- target policy smoothing (eq. 14): a' = clip(mu'(s') + clip(eps, -c, c), -1, 1), eps ~ N(0, sigma);
- the clipped double-Q target (eq. 10 with eq. 14's a'): y = r + gamma d min_i Q'_i(s', a');
- the deterministic policy gradient's loss (Algorithm 1): J = -Q_1(s, mu(s)).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

Array = jax.Array


def smoothed_target_action(mu_t: Array, noise_t: Array, noise_clip: float) -> Array:
    """clip(mu_t + clip(noise_t, -noise_clip, noise_clip), -1, 1) `[A]`: the target policy's action
    `mu_t` `[A]` with its Gaussian noise draw `noise_t` `[A]` (already scaled by sigma)."""
    chex.assert_rank([mu_t, noise_t], 1)
    chex.assert_equal_shape([mu_t, noise_t])
    return jnp.clip(mu_t + jnp.clip(noise_t, -noise_clip, noise_clip), -1.0, 1.0)


def clipped_double_q_target(r_t: Array, discount_t: Array, q_t: Array) -> Array:
    """y = r_t + discount_t * min_i q_t[i] for one transition (`q_t` `[K]`: Q'_i(s_t, a'))."""
    chex.assert_rank([r_t, discount_t, q_t], [0, 0, 1])
    return r_t + discount_t * jnp.min(q_t)


def deterministic_actor_loss(q_t: Array) -> Array:
    """-q_t[0] `[]`: the first critic's value of the actor's action (`q_t` `[K]`)."""
    chex.assert_rank(q_t, 1)
    return -q_t[0]
