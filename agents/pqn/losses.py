"""The PQN loss: regression of Q(o_t, a_t) on the Q(lambda) target (Gallici et al. 2024)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp

from podrl.agents.q_learning import QNetwork

if TYPE_CHECKING:
    from podrl.agents.pqn.config import PQNConfig

Array = jax.Array
LossFn = Callable[[object, "PQNBatch", Array], tuple[Array, dict[str, Array]]]


class PQNBatch(NamedTuple):
    """A flat minibatch of `N` transitions.

    Attributes:
      observation: `[N, *obs]`, o_t.
      action: `[N]` int32, a_t.
      target: `[N]` float32, the Q(lambda) return G_t (`podrl.agents.returns.q_lambda_returns`),
        computed once per update from the params before it, and held fixed.
    """

    observation: Array
    action: Array
    target: Array


def make_loss_fn(config: PQNConfig, network: QNetwork) -> LossFn:
    """`loss_fn(network_params, batch, key) -> (loss, metrics)` for one minibatch:

        loss = 0.5 mean_n (Q(o_n, a_n) - G_n)^2

    (Gallici et al. 2024, arXiv:2407.04811, Algorithm 1; the target is a constant). Metrics
    (scalars): q_loss, q_mean (mean Q(o, a) of the taken actions), target_mean. `key` is
    accepted for the common signature (the loss is deterministic).
    """
    del config

    def loss_fn(network_params, batch: PQNBatch, key: Array) -> tuple[Array, dict[str, Array]]:
        del key
        chex.assert_rank([batch.action, batch.target], 1)
        q = network.apply(network_params, batch.observation)  # [N, A]
        q_taken = jnp.take_along_axis(q, batch.action[:, None].astype(jnp.int32), axis=-1)[:, 0]
        target = jax.lax.stop_gradient(batch.target)
        loss = 0.5 * jnp.mean(jnp.square(q_taken - target))
        return loss, {"q_loss": loss, "q_mean": jnp.mean(q_taken), "target_mean": jnp.mean(target)}

    return loss_fn
