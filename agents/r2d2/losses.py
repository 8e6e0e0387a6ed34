"""R2D2's targets and loss (Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed
Reinforcement Learning", ICLR, sec. 2-3), the target math single-sequence first (rlax names).

For a replayed sequence of W = burn_in + m steps started from the stored recurrent state s_0:

- burn-in: the online core runs over steps 0 .. burn_in - 1 from s_0 without gradient; its state
  starts the learned part (reset to zeros where an episode ended, as everywhere in the unroll);
- the learned part (steps burn_in .. W - 1): Q(o_t, .) of the online network, with gradient;
- targets (`n_step_q_targets`): y_t = h(R_t + w_t h^-1(Q_target(o'_{l_t}, a*))) with
  a* = argmax_a Q_online(o'_{l_t}, a) (double Q), R_t the m_t <= n step return cut at episode ends
  and at the sequence's end, w_t = gamma^{m_t} times the env discounts, l_t = t + m_t - 1 and
  o'_{l_t} its next observation seen with the state after step l_t (`networks.bootstrap_q`);
- loss: sum_i w_i mean_t (y_t - Q(o_t, a_t))^2 / 2 / N over the N sequences, w_i their importance
  weights (`podrl.agents.prioritised.importance_weights`), and each sequence's new priority
  eta max_t |delta_t| + (1 - eta) mean_t |delta_t| (returned as the metric "priority" `[N]`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp

from podrl.agents.masking import action_mask, select_value
from podrl.agents.prioritised import sequence_priority
from podrl.agents.r2d2.networks import RecurrentQNetwork, bootstrap_q, q_unroll
from podrl.agents.replay import n_step_targets
from podrl.agents.unroll import reset_before
from podrl.agents.value_rescaling import inverse_value_transform, value_transform

if TYPE_CHECKING:
    from podrl.agents.r2d2.config import R2D2Config

Array = jax.Array


class Step(NamedTuple):
    """One env step as the replay stores it and the loss reads it; batched, every field leads with `[N]`
    (a drawn window: `[W, N]`, time-major).

    Attributes:
      observation: `[*obs]` o_t (uint8 stays uint8). action: int32 `[]` a_t.
      reward: float32 `[]` r_{t+1} (after the learner's clip). discount: float32 `[]` (0: terminated at t+1).
      truncated: bool `[]` the episode was cut at t+1. next_observation: `[*obs]` o_{t+1} before any reset.
    """

    observation: Array
    action: Array
    reward: Array
    discount: Array
    truncated: Array
    next_observation: Array

    @property
    def episode_end(self) -> Array:
        """bool: an episode ended at t+1 (terminated or truncated)."""
        return (self.discount == 0.0) | self.truncated


class R2D2Batch(NamedTuple):
    """`N` replayed sequences of `W = burn_in + m` steps, as the loss takes them.

    Attributes:
      window: their `Step`s, time-major: every field `[W, N, ...]`.
      start_state: the actor's core state before step 0, leaves `[N, ...]`.
      weight: float32 `[N]` importance weights. index: int32 `[N]` which sequences (for their priorities).
      target_q: float32 `[m, N, A]` the target network's Q of `window.next_observation[burn_in + t]`.
    """

    window: Step
    start_state: Any
    weight: Array
    index: Array
    target_q: Array


def n_step_q_targets(r_t: Array, discount_t: Array, episode_end_t: Array, q_target_t: Array, q_selector_t: Array,
                     n: int, gamma: float, rescale: bool, mask_t: Array | None = None) -> Array:
    """y `[m]`: the n-step double-Q targets of one sequence's m learned steps (module docstring).

    Args:
      r_t: `[m]` rewards r_{t+1}. discount_t: `[m]` env discounts. episode_end_t: `[m]` bool.
      q_target_t: `[m, A]` target-network Q values of o'_t (after step t, before any reset).
      q_selector_t: `[m, A]` the Q values that pick the bootstrap action (the online network's for
        double Q, `q_target_t` for the max).
      n: steps of reward; gamma: the discount; rescale: y = h(R + w h^-1(Q)) instead of R + w Q.
      mask_t: bool `[m, A]` the legal actions of o'_t (its `action_mask`): the bootstrap action is the
        best legal one (`podrl.agents.masking.select_value`); None: every action.
    """
    chex.assert_rank([r_t, discount_t, episode_end_t, q_target_t, q_selector_t], [1, 1, 1, 2, 2])
    ret, weight, last = n_step_targets(r_t, discount_t, episode_end_t, n, gamma)
    if mask_t is None:
        best = jnp.argmax(q_selector_t[last], axis=-1)
        bootstrap = jnp.take_along_axis(q_target_t[last], best[:, None], axis=-1)[:, 0]
    else:
        bootstrap = select_value(q_target_t[last], q_selector_t[last], mask_t[last])
    if not rescale:
        return ret + weight * bootstrap
    return value_transform(ret + weight * inverse_value_transform(bootstrap))


def online_q(config: R2D2Config, network: RecurrentQNetwork, params: Any, batch: R2D2Batch) -> tuple[Array, Any]:
    """`(q [m, N, A], next_carry [m, N, ...])` of the learned steps: the core warmed up over the burn-in
    from the stored state (no gradient), then unrolled with gradient."""
    burn, window = config.burn_in, batch.window
    reset = reset_before(window.episode_end)
    carry = batch.start_state
    if burn:
        burn_obs = jax.tree.map(lambda x: x[:burn], window.observation)
        _, burned = q_unroll(network, jax.lax.stop_gradient(params), carry, burn_obs, reset[:burn])
        carry = jax.lax.stop_gradient(jax.tree.map(lambda x: x[-1], burned))
    return q_unroll(network, params, carry, jax.tree.map(lambda x: x[burn:], window.observation), reset[burn:])


def learned_q_and_targets(config: R2D2Config, network: RecurrentQNetwork, params: Any,
                          batch: R2D2Batch) -> tuple[Array, Array]:
    """`(q_taken [m, N], y [m, N])`: the online Q of the actions taken at the learned steps (with gradient)
    and their fixed targets (`n_step_q_targets`, module docstring)."""
    learned = jax.tree.map(lambda x: x[config.burn_in:], batch.window)  # [m, N, ...]
    q, next_carry = online_q(config, network, params, batch)
    if config.double_q:
        fixed = jax.lax.stop_gradient((params, q, next_carry))
        selector = bootstrap_q(network, *fixed, learned.next_observation, learned.truncated)
    else:
        selector = batch.target_q
    targets = jax.vmap(n_step_q_targets, in_axes=(1, 1, 1, 1, 1, None, None, None, 1), out_axes=1)
    y = targets(learned.reward, learned.discount, learned.episode_end, batch.target_q, selector,
                config.n_step, config.gamma, config.value_rescaling, action_mask(learned.next_observation))
    q_taken = jnp.take_along_axis(q, learned.action[:, :, None], axis=-1)[..., 0]
    return q_taken, jax.lax.stop_gradient(y)


def make_loss_fn(config: R2D2Config, network: RecurrentQNetwork) -> Callable[..., tuple[Array, dict[str, Array]]]:
    """`loss_fn(params, batch: R2D2Batch, key) -> (loss [], metrics)`: the importance-weighted squared TD
    error of the learned steps (module docstring); metrics "q_loss", "q_mean", "target_mean" and
    "priority" `[N]` (each sequence's new priority, which the replay frame takes out)."""

    def loss_fn(params, batch: R2D2Batch, key: Array):
        del key
        q_taken, y = learned_q_and_targets(config, network, params, batch)
        td = y - q_taken  # [m, N]
        loss = jnp.mean(batch.weight * jnp.mean(0.5 * jnp.square(td), axis=0))
        priority = sequence_priority(jnp.abs(td).T, config.priority_eta)
        return loss, {"q_loss": loss, "q_mean": jnp.mean(q_taken), "target_mean": jnp.mean(y), "priority": priority}

    return loss_fn
