"""The PPO loss: clipped surrogate, (optionally clipped) value loss, entropy bonus."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from podrl.agents.actor_critic import hyperparams_for
from podrl.agents.networks import ActorCritic, action_distribution
from podrl.agents.unroll import policy_and_value

if TYPE_CHECKING:
    from podrl.agents.ppo.config import PPOConfig, PPOHyperparams

Array = jax.Array
LossFn = Callable[..., tuple[Array, dict[str, Array]]]  # (params, batch, key[, hyperparams])


class PPOBatch(NamedTuple):
    """A flat minibatch of `N` transitions, or with a recurrent core `[T, B]` whole sequences
    (then `N` reads `T, B` below) with the two sequence fields.

    Attributes:
      observation: `[N, *obs]`.
      action: `[N, *act]`.
      log_prob: `[N]`, log pi_old(a|o) of the acting policy.
      advantage: `[N]`, GAE advantage (not yet normalized).
      target: `[N]`, the critic's regression target (advantage + old value).
      value: `[N]`, V_old(o), the acting-time value (centre of the value clip).
      actor_state: recurrent only, the core state before step 0, `[B, ...]` (else ()).
      episode_end: recurrent only, `[T, B]` bool, where the core is reset (else None).
    """

    observation: Array
    action: Array
    log_prob: Array
    advantage: Array
    target: Array
    value: Array
    actor_state: Any = ()
    episode_end: Array | None = None


def make_loss_fn(config: PPOConfig, network: ActorCritic) -> LossFn:
    """`loss_fn(params, batch, key, hyperparams=None) -> (loss, metrics)` for one minibatch;
    `hyperparams` (a `PPOHyperparams`, default: the config's values) gives clip_eps,
    value_coef and entropy_coef.

    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy, with

      policy_loss = mean(max(-A r, -A clip(r, 1 - eps, 1 + eps))),  r = pi / pi_old
      value_loss  = 0.5 mean((v - target)^2), or with `clip_value_loss`
                    0.5 mean(max((v - target)^2, (v_old + clip(v - v_old, -eps, eps) - target)^2))

    A is standardized within the minibatch when `normalize_advantages`. Metrics
    (scalars): policy_loss, value_loss, entropy, approx_kl (the unbiased
    estimator mean((r - 1) - log r)) and clip_fraction (share of |r - 1| > eps).
    The loss is deterministic; `key` is accepted for the common signature.
    """
    dist = action_distribution(network.discrete)
    defaults = hyperparams_for(config)

    def loss_fn(params, batch: PPOBatch, key: Array, hyperparams: PPOHyperparams | None = None):
        del key
        hp = defaults if hyperparams is None else hyperparams
        eps = hp.clip_eps
        dist_params, value = policy_and_value(network, params, batch.observation, batch.actor_state,
                                              batch.episode_end)
        log_ratio = dist.log_prob(dist_params, batch.action) - batch.log_prob
        ratio = jnp.exp(log_ratio)

        advantage = batch.advantage
        if config.normalize_advantages:
            advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        surrogate = jnp.minimum(ratio * advantage, jnp.clip(ratio, 1.0 - eps, 1.0 + eps) * advantage)
        policy_loss = -jnp.mean(surrogate)

        value_error = jnp.square(value - batch.target)
        if config.clip_value_loss:
            clipped = batch.value + jnp.clip(value - batch.value, -eps, eps)
            value_error = jnp.maximum(value_error, jnp.square(clipped - batch.target))
        value_loss = 0.5 * jnp.mean(value_error)

        entropy = jnp.mean(dist.entropy(dist_params))
        loss = policy_loss + hp.value_coef * value_loss - hp.entropy_coef * entropy
        metrics = {
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
            "clip_fraction": jnp.mean((jnp.abs(ratio - 1.0) > eps).astype(jnp.float32)),
        }
        return loss, metrics

    return loss_fn
