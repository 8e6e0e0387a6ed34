"""The IMPALA loss: V-trace policy gradient, baseline regression, entropy bonus."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import jax
import jax.numpy as jnp

from podrl.agents.actor_critic import hyperparams_for
from podrl.agents.networks import ActorCritic, action_distribution
from podrl.agents.returns import batched_vtrace, learner_rewards
from podrl.agents.unroll import trajectory_outputs
from podrl.core.types import Trajectory

if TYPE_CHECKING:
    from podrl.agents.impala.config import ImpalaConfig, ImpalaHyperparams

Array = jax.Array
LossFn = Callable[..., tuple[Array, dict[str, Array]]]  # (params, batch, key[, hyperparams])


def make_loss_fn(config: ImpalaConfig, network: ActorCritic) -> LossFn:
    """`loss_fn(params, batch, key, hyperparams=None) -> (loss, metrics)` for one minibatch of
    sequences; `hyperparams` (an `ImpalaHyperparams`, default: the config's values) gives gamma,
    value_coef and entropy_coef.

    `batch` is a time-major `Trajectory` `[T, B]` whose `agent_extras["log_prob"]`
    is log mu(a_t|x_t) of the behaviour (acting) policy. With the *current*
    params, pi and V(x_t), V(x_{t+1}) (from `next_observation`; with a recurrent core
    re-unrolled from `batch.actor_state`, see `podrl.agents.unroll`) give

      rho_t        = pi(a_t|x_t) / mu(a_t|x_t)
      vs, A        = V-trace(V(x_t), V(x_{t+1}), reward_scale * clip(r_t), gamma * discount_t,
                             episode_end_t, rho_t)          (`podrl.agents.returns.vtrace`)
      policy_loss  = -mean(A_t log pi(a_t|x_t))
      value_loss   = 0.5 mean((vs_t - V(x_t))^2)
      loss         = policy_loss + value_coef * value_loss - entropy_coef * mean(entropy)

    with `lax.stop_gradient` on vs, A (and everything they are built from), so
    gradients flow only through log pi and V(x_t). Means are over `T * B`; with
    `loss_reduction="sum"` the loss is `T * B` times this (the sums), the metrics stay means.
    clip(r_t) clips to [-reward_clip, reward_clip] when `reward_clip` is set (`learner_rewards`).
    Metrics (scalars): policy_loss, value_loss, entropy, mean_rho, approx_kl
    (mean((rho - 1) - log rho)), and the share of steps whose ratio exceeds each
    clip threshold: rho_clip_fraction, c_clip_fraction, pg_rho_clip_fraction.
    The loss is deterministic; `key` is accepted for the common signature.
    """
    dist = action_distribution(network.discrete)
    sg = jax.lax.stop_gradient

    defaults = hyperparams_for(config)

    def loss_fn(params, batch: Trajectory, key: Array, hyperparams: ImpalaHyperparams | None = None):
        del key
        hp = defaults if hyperparams is None else hyperparams
        dist_params, value, next_value = trajectory_outputs(network, params, batch)
        log_prob = dist.log_prob(dist_params, batch.action)
        log_rho = sg(log_prob) - batch.agent_extras["log_prob"]
        rho = jnp.exp(log_rho)
        vs, pg_advantage = batched_vtrace(
            sg(value), sg(next_value), learner_rewards(batch.reward, config.reward_clip, config.reward_scale),
            hp.gamma * batch.discount, batch.episode_end, rho,
            config.vtrace_lambda, config.clip_rho, config.clip_pg_rho, config.clip_c,
        )
        vs, pg_advantage = sg(vs), sg(pg_advantage)

        policy_loss = -jnp.mean(pg_advantage * log_prob)
        value_loss = 0.5 * jnp.mean(jnp.square(vs - value))
        entropy = jnp.mean(dist.entropy(dist_params))
        loss = policy_loss + hp.value_coef * value_loss - hp.entropy_coef * entropy
        if config.loss_reduction == "sum":
            loss = loss * pg_advantage.size  # the sums over the T x B steps; the metrics stay means
        fraction = lambda mask: jnp.mean(mask.astype(jnp.float32))  # noqa: E731
        metrics = {
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "mean_rho": jnp.mean(rho),
            "approx_kl": jnp.mean((rho - 1.0) - log_rho),
            "rho_clip_fraction": fraction(rho > config.clip_rho),
            "c_clip_fraction": fraction(rho > config.clip_c),
            "pg_rho_clip_fraction": fraction(rho > config.clip_pg_rho),
            "mean_advantage": jnp.mean(pg_advantage),
        }
        return loss, metrics

    return loss_fn
