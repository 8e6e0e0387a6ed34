"""Return and advantage estimators (GAE, V-trace, Q(lambda)), pure and single-sequence (rlax style).

Functions take one time-major sequence `[T]`; batch them with `jax.vmap` at the
call site, or use the `batched_*` forms over `[T, B]`.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array


def learner_rewards(r_t: Array, reward_clip: float | None, reward_scale: float) -> Array:
    """The rewards that enter GAE / V-trace: `reward_scale * clip(r_t, -c, c)` (no clip when `c` is None).

    `r_t`: `[T, B]` (any shape) raw env rewards; the env's logged episode returns are
    never affected. Clipping to [-1, 1] is the Atari convention of Mnih et al. 2015.
    """
    if reward_clip is not None:
        r_t = jnp.clip(r_t, -reward_clip, reward_clip)
    return r_t * reward_scale


def gae(
    r_t: Array,
    discount_t: Array,
    episode_end_t: Array,
    v_tm1: Array,
    v_t: Array,
    gamma: float,
    lambda_: float,
) -> tuple[Array, Array]:
    """Generalized advantage estimation over one sequence.

    See "High-Dimensional Continuous Control Using Generalized Advantage
    Estimation" by Schulman, Moritz, Levine, Jordan and Abbeel (ICLR 2016),
    https://arxiv.org/abs/1506.02438.

        delta_t = r_t + gamma * discount_t * v_t - v_tm1
        A_t     = delta_t + gamma * lambda_ * (1 - episode_end_t) * A_{t+1},  A_T = 0

    Names follow rlax (and `vtrace` below): index t is the step, `v_tm1` the value
    of its observation, `v_t` the value of the next one. A terminated step has
    `discount_t = 0` (no bootstrap). A truncated step has `discount_t = 1`,
    bootstraps from `v_t` (the value of the true final observation) and, like a
    termination, stops the recursion (`episode_end_t`).

    Args:
      r_t: `[T]` the reward for the action taken at t.
      discount_t: `[T]` 0 where the episode terminated after step t, else 1.
      episode_end_t: `[T]` bool or 0/1, the episode ended (terminated or truncated)
        after step t.
      v_tm1: `[T]` V(o_t).
      v_t: `[T]` V(o_{t+1}), o_{t+1} taken before any auto-reset.
      gamma: discount factor.
      lambda_: GAE mixing parameter (0: one-step TD, 1: Monte Carlo).

    Returns:
      `(advantage [T], target [T])` with `target = advantage + v_tm1`, the
      lambda-return regression target of the critic.
    """
    chex.assert_rank([r_t, discount_t, episode_end_t, v_tm1, v_t], 1)
    chex.assert_equal_shape([r_t, discount_t, episode_end_t, v_tm1, v_t])
    chex.assert_type([r_t, discount_t, v_tm1, v_t], float)

    delta = r_t + gamma * discount_t * v_t - v_tm1
    decay = (gamma * lambda_) * (1.0 - episode_end_t.astype(delta.dtype))

    def backward(advantage_tp1, delta_and_decay):
        delta_t, decay_t = delta_and_decay
        advantage_t = delta_t + decay_t * advantage_tp1
        return advantage_t, advantage_t

    _, advantage = lax.scan(backward, jnp.zeros_like(delta[0]), (delta, decay), reverse=True)
    return advantage, advantage + v_tm1


_gae_over_batch = jax.vmap(gae, in_axes=(1, 1, 1, 1, 1, None, None), out_axes=1)


def batched_gae(
    r_t: Array,
    discount_t: Array,
    episode_end_t: Array,
    v_tm1: Array,
    v_t: Array,
    gamma: float,
    lambda_: float,
) -> tuple[Array, Array]:
    """`gae` over a time-major batch: every argument is `[T, B]`; returns `[T, B]` twice."""
    chex.assert_rank([r_t, discount_t, episode_end_t, v_tm1, v_t], 2)
    chex.assert_equal_shape([r_t, discount_t, episode_end_t, v_tm1, v_t])
    return _gae_over_batch(r_t, discount_t, episode_end_t, v_tm1, v_t, gamma, lambda_)


def vtrace(
    v_tm1: Array,
    v_t: Array,
    r_t: Array,
    discount_t: Array,
    episode_end_t: Array,
    rho_tm1: Array,
    lambda_: float = 1.0,
    clip_rho_threshold: float = 1.0,
    clip_pg_rho_threshold: float = 1.0,
    clip_c_threshold: float = 1.0,
) -> tuple[Array, Array]:
    """V-trace value targets and policy-gradient advantages over one sequence.

    See "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
    Actor-Learner Architectures" by Espeholt, Soyer, Munos et al. (ICML 2018),
    https://arxiv.org/abs/1802.01561, section 4. For step s of the sequence
    (x_s the observation, a_s ~ mu the behaviour policy, pi the target policy):

        rho_s = min(rho_bar, pi(a_s|x_s) / mu(a_s|x_s))            (clip_rho_threshold)
        c_s   = lambda_ * min(c_bar, pi(a_s|x_s) / mu(a_s|x_s))    (clip_c_threshold)
        delta_s = rho_s * (r_s + discount_s * V(x_{s+1}) - V(x_s))
        v_s - V(x_s) = delta_s + discount_s * c_s * (1 - end_s) * (v_{s+1} - V(x_{s+1}))

    i.e. v_s = V(x_s) + sum_{t>=s} (prod_{i<t} discount_i c_i) delta_t, summed to
    the end of the sequence or of the episode; beyond the sequence v - V = 0.
    The policy-gradient advantage uses rho_bar_pg (clip_pg_rho_threshold):

        A_s = min(rho_bar_pg, pi/mu) * (r_s + discount_s * q_{s+1} - V(x_s)),

    with q_{s+1} = v_{s+1}, the V-trace target of x_{s+1}, where the episode and
    the sequence go on, else the bootstrap value V(x_{s+1}) = `v_t[s]`.

    Episode boundaries follow `gae`: `v_t[s]` is V of the true next observation
    (taken before any auto-reset). A terminated step has `discount_s = 0`; a
    truncated one keeps `discount_s = gamma` and bootstraps from `v_t[s]`; both
    set `end_s`, which cuts the trace. With `rho = 1`, `lambda_ = 1` and no
    episode end, `v_s` is the n-step return bootstrapped from `v_t[-1]`.

    No gradient is stopped here; the caller applies `lax.stop_gradient`.

    Args:
      v_tm1: `[T]` V(x_s), the values of the sequence's observations.
      v_t: `[T]` V(x_{s+1}), the values of the next observations.
      r_t: `[T]` r_s, the reward for a_s.
      discount_t: `[T]` gamma times 0 where the episode terminated after step s, else gamma.
      episode_end_t: `[T]` bool or 0/1, the episode ended (terminated or truncated) after s.
      rho_tm1: `[T]` importance *ratios* pi(a_s|x_s) / mu(a_s|x_s) (not logs;
        pass `exp(log_pi - log_mu)`).
      lambda_: trace mixing parameter in [0, 1] (scales c_s).
      clip_rho_threshold: rho_bar, clips the importance weights of delta_s.
      clip_pg_rho_threshold: rho_bar_pg, clips the weights of the pg advantage.
      clip_c_threshold: c_bar, clips the trace coefficients c_s.

    Returns:
      `(vs [T], pg_advantage [T])`: the value targets v_s and advantages A_s.
    """
    chex.assert_rank([v_tm1, v_t, r_t, discount_t, episode_end_t, rho_tm1], 1)
    chex.assert_equal_shape([v_tm1, v_t, r_t, discount_t, episode_end_t, rho_tm1])
    chex.assert_type([v_tm1, v_t, r_t, discount_t, rho_tm1], float)

    continues = 1.0 - episode_end_t.astype(v_tm1.dtype)
    clipped_rho = jnp.minimum(clip_rho_threshold, rho_tm1)
    c = lambda_ * jnp.minimum(clip_c_threshold, rho_tm1)
    delta = clipped_rho * (r_t + discount_t * v_t - v_tm1)

    def backward(correction_tp1, xs):  # correction_s = v_s - V(x_s)
        delta_s, discount_s, c_s, continues_s = xs
        correction_s = delta_s + discount_s * c_s * continues_s * correction_tp1
        return correction_s, correction_s

    _, correction = lax.scan(backward, jnp.zeros_like(v_tm1[0]), (delta, discount_t, c, continues), reverse=True)
    vs = v_tm1 + correction
    vs_tp1 = jnp.concatenate([vs[1:], v_t[-1:]])
    q_t = r_t + discount_t * jnp.where(continues > 0, vs_tp1, v_t)
    pg_advantage = jnp.minimum(clip_pg_rho_threshold, rho_tm1) * (q_t - v_tm1)
    return vs, pg_advantage


_vtrace_over_batch = jax.vmap(vtrace, in_axes=(1, 1, 1, 1, 1, 1, None, None, None, None), out_axes=1)


def batched_vtrace(
    v_tm1: Array,
    v_t: Array,
    r_t: Array,
    discount_t: Array,
    episode_end_t: Array,
    rho_tm1: Array,
    lambda_: float = 1.0,
    clip_rho_threshold: float = 1.0,
    clip_pg_rho_threshold: float = 1.0,
    clip_c_threshold: float = 1.0,
) -> tuple[Array, Array]:
    """`vtrace` over a time-major batch: every array is `[T, B]`; returns `(vs, pg_advantage)` `[T, B]`."""
    chex.assert_rank([v_tm1, v_t, r_t, discount_t, episode_end_t, rho_tm1], 2)
    chex.assert_equal_shape([v_tm1, v_t, r_t, discount_t, episode_end_t, rho_tm1])
    return _vtrace_over_batch(
        v_tm1, v_t, r_t, discount_t, episode_end_t, rho_tm1,
        lambda_, clip_rho_threshold, clip_pg_rho_threshold, clip_c_threshold,
    )


def q_lambda_returns(
    r_t: Array,
    discount_t: Array,
    q_t: Array,
    episode_end_t: Array,
    lambda_: float,
) -> Array:
    """Peng's Q(lambda) returns over one sequence, as PQN computes them.

    See "Simplifying Deep Temporal Difference Learning" by Gallici, Fellows, Ellis, Pou,
    Masmitja, Foerster and Martin (2024), https://arxiv.org/abs/2407.04811, Algorithm 1
    and eq. (7) (the lambda-return of Peng & Williams 1996 with max_a Q bootstraps):

        G_t = r_t + discount_t * [(1 - lambda_) * q_t + lambda_ * G'_{t+1}]
        G'_{t+1} = q_t      if episode_end_t or t = T - 1   (the recursion is cut)
                 = G_{t+1}  otherwise

    with `q_t = max_a Q(o_{t+1}, a)`, o_{t+1} the observation *before* any auto-reset
    (`Trajectory.next_observation`). A terminated step has `discount_t = 0` (G_t = r_t);
    a truncated one keeps `discount_t = gamma` and bootstraps from `q_t`, the value of its
    true final observation; both cut the recursion (`episode_end_t`), and so does the
    last step of the sequence. lambda_ = 0 gives the one-step Q-learning target
    r_t + discount_t q_t. No gradient is stopped here; the caller applies
    `lax.stop_gradient`.

    Args:
      r_t: `[T]` the reward for the action taken at t.
      discount_t: `[T]` gamma, times 0 where the episode terminated after step t.
      q_t: `[T]` max_a Q(o_{t+1}, a).
      episode_end_t: `[T]` bool or 0/1, the episode ended (terminated or truncated) after t.
      lambda_: mixing parameter in [0, 1].

    Returns:
      `[T]` the Q(lambda) targets G_t for Q(o_t, a_t).
    """
    chex.assert_rank([r_t, discount_t, q_t, episode_end_t], 1)
    chex.assert_equal_shape([r_t, discount_t, q_t, episode_end_t])
    chex.assert_type([r_t, discount_t, q_t], float)
    cut = episode_end_t.astype(bool)

    def backward(g_tp1, xs):
        r, discount, q, cut_t = xs
        g_t = r + discount * ((1.0 - lambda_) * q + lambda_ * jnp.where(cut_t, q, g_tp1))
        return g_t, g_t

    _, returns = lax.scan(backward, q_t[-1], (r_t, discount_t, q_t, cut), reverse=True)
    return returns


_q_lambda_over_batch = jax.vmap(q_lambda_returns, in_axes=(1, 1, 1, 1, None), out_axes=1)


def batched_q_lambda_returns(
    r_t: Array, discount_t: Array, q_t: Array, episode_end_t: Array, lambda_: float
) -> Array:
    """`q_lambda_returns` over a time-major batch: every array is `[T, B]`; returns `[T, B]`."""
    chex.assert_rank([r_t, discount_t, q_t, episode_end_t], 2)
    chex.assert_equal_shape([r_t, discount_t, q_t, episode_end_t])
    return _q_lambda_over_batch(r_t, discount_t, q_t, episode_end_t, lambda_)
