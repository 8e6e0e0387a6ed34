"""DQN targets and loss (Mnih et al. 2015; Double DQN: van Hasselt et al. 2016, arXiv:1509.06461)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax

from podrl.agents.masking import select_value
from podrl.agents.q_learning import QNetwork

if TYPE_CHECKING:
    from podrl.agents.dqn.config import DQNConfig

Array = jax.Array


class DQNBatch(NamedTuple):
    """A minibatch of `N` sampled transitions with their (fixed) regression targets.

    Attributes:
      observation: `[N, *obs]` o_t.
      action: int32 `[N]` a_t.
      target: float32 `[N]` y_t (see `q_learning_target`), computed before the gradient step.
      weight: float32 `[N]` importance weights of a prioritised replay's draw (None: uniform replay).
      index: int32 `[N]` which transitions a prioritised replay drew (None: uniform replay).
    """

    observation: Array
    action: Array
    target: Array
    weight: Array | None = None
    index: Array | None = None


def q_learning_target(r_t: Array, discount_t: Array, q_t_value: Array, q_t_selector: Array,
                      mask_t: Array | None = None) -> Array:
    """y = r_t + discount_t * q_t_value[argmax_a q_t_selector[a]] for one transition, the argmax over the
    bootstrap observation's legal actions (`mask_t`; `podrl.agents.masking.select_value`).

    Args:
      r_t: `[]` the (n-step) return R_t.
      discount_t: `[]` its bootstrap weight (gamma^n, or 0 after a termination).
      q_t_value: `[A]` target-network Q values of the bootstrap observation.
      q_t_selector: `[A]` the Q values that choose the action: the online network's
        (Double DQN) or `q_t_value` itself (the max of the original DQN).
      mask_t: bool `[A]` the bootstrap observation's legal actions, or None (all).
    """
    chex.assert_rank([r_t, discount_t, q_t_value, q_t_selector], [0, 0, 1, 1])
    if mask_t is None:
        best = jnp.argmax(q_t_selector)
        return r_t + discount_t * q_t_value[best]
    return r_t + discount_t * select_value(q_t_value, q_t_selector, mask_t)


batched_q_learning_target = jax.vmap(q_learning_target)
"""`q_learning_target` over a leading `[N]` axis."""


def td_loss(td: Array, kind: str) -> Array:
    """Per-transition loss `[N]` of TD errors `[N]`: Huber (delta 1) or half the squared error."""
    if kind == "huber":
        return optax.huber_loss(td, delta=1.0)
    return 0.5 * jnp.square(td)


def make_loss_fn(config: DQNConfig, network: QNetwork) -> Callable[..., tuple[Array, dict[str, Array]]]:
    """`loss_fn(network_params, batch: DQNBatch, key) -> (loss [], metrics)`: the mean TD loss
    of Q(o_t, a_t) against the fixed target; metrics "q_loss", "q_mean", "target_mean". A prioritised
    replay's batch (`config.prioritised`) weighs each loss by its importance weight and adds the metric
    "priority" `[N]`, |delta| (Ape-X), which the replay frame takes out."""

    def loss_fn(params, batch: DQNBatch, key: Array):
        del key
        chex.assert_rank([batch.action, batch.target], 1)
        q = network.apply(params, batch.observation)  # [N, A]
        q_taken = jnp.take_along_axis(q, batch.action[:, None], axis=-1)[:, 0]
        td = q_taken - batch.target
        metrics = {"q_mean": jnp.mean(q_taken), "target_mean": jnp.mean(batch.target)}
        if not config.prioritised:
            loss = jnp.mean(td_loss(td, config.loss))
            return loss, {"q_loss": loss, **metrics}
        loss = jnp.mean(batch.weight * td_loss(td, config.loss))
        return loss, {"q_loss": loss, **metrics, "priority": jnp.abs(td)}

    return loss_fn
