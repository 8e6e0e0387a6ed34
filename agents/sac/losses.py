"""SAC's math, single transition first (batch with `jax.vmap` at the call site), rlax-style.

Haarnoja et al. 2018a ("Soft Actor-Critic: Off-Policy Maximum Entropy Deep Reinforcement
Learning with a Stochastic Actor", arXiv:1801.01290) and 2018b ("Soft Actor-Critic Algorithms
and Applications", arXiv:1812.05905), with the twin critics' minimum of Fujimoto et al. 2018:

- the tanh-squashed Gaussian's log-density (2018a, appendix C, eq. 21):
  log pi(u|s) = log N(z; mu, sigma) - sum_j log(1 - tanh(z_j)^2),  u = tanh(z);
- the soft Q target (2018b, eqs. 2-3, one sample a' ~ pi(.|s')):
  y = r + gamma d (min_i Q'_i(s', a') - alpha log pi(a'|s'));
- the actor loss (2018b, eq. 7, reparameterized a = tanh(mu + sigma eps)):
  J_pi = alpha log pi(a|s) - min_i Q_i(s, a);
- the temperature loss (2018b, eq. 18): J(alpha) = -alpha (log pi(a|s) + H_target), its
  gradient taken w.r.t. log alpha (alpha = exp(log alpha) stays positive), log pi fixed.
"""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp

Array = jax.Array

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def tanh_gaussian_log_prob(z_t: Array, mean_t: Array, log_std_t: Array) -> Array:
    """log pi(tanh(z)) `[]` for one pre-squash sample `z_t` `[A]` of N(mean_t, exp(log_std_t)) `[A]`.

    The change of variables subtracts log(1 - tanh(z)^2) per dimension, written stably as
    2 (log 2 - z - softplus(-2 z)) (the same value, without 1 - tanh^2 rounding to 0)."""
    chex.assert_rank([z_t, mean_t, log_std_t], 1)
    chex.assert_equal_shape([z_t, mean_t, log_std_t])
    gaussian = -0.5 * jnp.square((z_t - mean_t) * jnp.exp(-log_std_t)) - log_std_t - _HALF_LOG_2PI
    log_det = 2.0 * (math.log(2.0) - z_t - jax.nn.softplus(-2.0 * z_t))
    return jnp.sum(gaussian - log_det)


def soft_q_target(r_t: Array, discount_t: Array, q_t: Array, log_pi_t: Array, alpha: Array) -> Array:
    """y = r_t + discount_t * (min_i q_t[i] - alpha * log_pi_t) for one transition.

    Args:
      r_t: `[]` reward for a_{t-1}.
      discount_t: `[]` gamma times the env discount (0 after a termination).
      q_t: `[K]` target critics' Q'_i(s_t, a'), a' ~ pi(.|s_t).
      log_pi_t: `[]` log pi(a'|s_t).
      alpha: `[]` the entropy temperature.
    """
    chex.assert_rank([r_t, discount_t, q_t, log_pi_t, alpha], [0, 0, 1, 0, 0])
    return r_t + discount_t * (jnp.min(q_t) - alpha * log_pi_t)


def actor_loss(q_t: Array, log_pi_t: Array, alpha: Array) -> Array:
    """alpha * log_pi_t - min_i q_t[i] `[]` for one state and one reparameterized action (`q_t` `[K]`)."""
    chex.assert_rank([q_t, log_pi_t, alpha], [1, 0, 0])
    return alpha * log_pi_t - jnp.min(q_t)


def temperature_loss(log_alpha: Array, log_pi_t: Array, target_entropy: float) -> Array:
    """-exp(log_alpha) * (log_pi_t + target_entropy) `[]`, log_pi_t held fixed (no gradient)."""
    chex.assert_rank([log_alpha, log_pi_t], 0)
    return -jnp.exp(log_alpha) * (jax.lax.stop_gradient(log_pi_t) + target_entropy)
