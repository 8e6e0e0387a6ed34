"""MuZero's loss: the K-step unroll of the learned model against a window's targets.

Schrittwieser et al. 2020 (Appendix G and the pseudocode's `update_weights`): from the
representation of the window's first observation the dynamics is unrolled along the replayed
actions; each of the K + 1 states predicts the policy and value, each step the reward; the loss
is the cross-entropy of each against its target (`podrl.agents.muzero.targets.window_targets`; value and
reward as two-hot categoricals of h(target)), the value term weighted by `value_loss_weight`. The
gradient of the K unrolled steps' terms is scaled by 1/K and that of each predicted hidden state
flowing into the next dynamics step by 1/2 (the pseudocode's `scale_gradient`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax

from podrl.agents.muzero.networks import MuZeroNetwork
from podrl.agents.muzero.targets import WindowTargets, logits_to_scalar, scalar_to_target

Array = jax.Array


class MuZeroBatch(NamedTuple):
    """`N` replayed windows with their (fixed) targets.

    Attributes:
      observation: `[N, *obs]` the first observation of each window.
      action: int32 `[N, K]` the actions taken at steps 0..K-1.
      targets: `WindowTargets`, every leaf with a leading `[N]`.
      weight: float32 `[N]` importance weights of a prioritised replay's draw (None: uniform replay).
      index: int32 `[N]` which windows a prioritised replay drew (None: uniform replay).
    """

    observation: Array
    action: Array
    targets: WindowTargets
    weight: Array | None = None
    index: Array | None = None


def scale_gradient(x: Array, scale: float) -> Array:
    """`x` forward; its gradient multiplied by `scale` backward."""
    return x * scale + jax.lax.stop_gradient(x) * (1.0 - scale)


def unroll(network: MuZeroNetwork, params, observation: Array, action: Array):
    """The model unrolled along `action` `[N, K]` from `observation` `[N, *obs]`.

    Returns `(policy_logits [K + 1, N, A], value_logits [K + 1, N, 2S + 1], reward_logits [K, N, 2S + 1])`:
    index k is the state after k model steps; reward k the reward of the (k + 1)-th action."""
    state = network.apply(params, observation, method=MuZeroNetwork.represent)

    def step(state, a):
        next_state, reward_logits = network.apply(params, state, a, method=MuZeroNetwork.dynamics)
        return scale_gradient(next_state, 0.5), (next_state, reward_logits)

    _, (states, reward_logits) = jax.lax.scan(step, state, jnp.swapaxes(action, 0, 1))
    states = jnp.concatenate([state[None], states], axis=0)
    policy_logits, value_logits = network.apply(params, states, method=MuZeroNetwork.predict)
    return policy_logits, value_logits, reward_logits


def step_weights(unroll_steps: int) -> Array:
    """`[K + 1]` gradient scales of the unroll's terms: 1 at the root, 1/K for the unrolled states."""
    return jnp.concatenate([jnp.ones(1), jnp.full(unroll_steps, 1.0 / unroll_steps)])


def make_loss_fn(config: Any, network: MuZeroNetwork) -> Callable[..., tuple[Array, dict[str, Array]]]:
    """`loss_fn(params, batch: MuZeroBatch, key) -> (loss [], metrics)`: the batch mean of the summed
    unroll losses (a prioritised replay's batch: each window's weighted by its importance weight);
    metrics "value_loss", "reward_loss", "policy_loss" (means per state / step), "value_target_mean",
    "policy_entropy" (of the root prediction), "policy_target_entropy" (of the root's target) and, for a
    prioritised batch, "priority" `[N]`: |v - z| of each window's root value prediction against its
    target (MuZero, Appendix G), which the replay frame takes out."""

    def loss_fn(params, batch: MuZeroBatch, key: Array):
        del key
        chex.assert_rank(batch.action, 2)
        policy_logits, value_logits, reward_logits = unroll(network, params, batch.observation, batch.action)
        targets = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch.targets)  # time-major [K(+1), N, ...]
        s = config.support_size
        value_ce = optax.softmax_cross_entropy(value_logits, scalar_to_target(targets.value, s))  # [K + 1, N]
        reward_ce = optax.softmax_cross_entropy(reward_logits, scalar_to_target(targets.reward, s))  # [K, N]
        policy_ce = optax.softmax_cross_entropy(policy_logits, targets.policy)  # [K + 1, N]
        weights = step_weights(config.unroll_steps)
        per_state = weights[:, None] * (config.value_loss_weight * value_ce + policy_ce)
        per_step = weights[1:, None] * reward_ce
        per_window = jnp.sum(per_state, axis=0) + jnp.sum(per_step, axis=0)  # [N]
        loss = jnp.mean(per_window if batch.weight is None else batch.weight * per_window)
        root_probs = jax.nn.softmax(policy_logits[0])
        metrics = {"value_loss": jnp.mean(value_ce), "reward_loss": jnp.mean(reward_ce),
                   "policy_loss": jnp.mean(policy_ce), "value_target_mean": jnp.mean(targets.value),
                   "policy_entropy": -jnp.mean(jnp.sum(root_probs * jnp.log(root_probs + 1e-12), axis=-1)),
                   "policy_target_entropy": -jnp.mean(jnp.sum(
                       targets.policy[:, 0] * jnp.log(targets.policy[:, 0] + 1e-12), axis=-1))}
        if batch.weight is not None:
            metrics["priority"] = jnp.abs(logits_to_scalar(value_logits[0], s) - targets.value[0])
        return loss, metrics

    return loss_fn
