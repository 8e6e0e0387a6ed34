"""The network over a time-major trajectory, feed-forward or recurrent: what the PPO and
IMPALA learners (and acting) call instead of `network.apply`.

Recurrent networks (`podrl.agents.cores.RecurrentActorCritic`) are re-unrolled from the carry
the actor had before step 0 (`Trajectory.actor_state`, `[B, ...]`), with the layouts'
reset rule: the carry used at step t is

    carry_t = zero            if t > 0 and episode_end[t - 1]   (an episode ended at t-1)
            = carry_0         (= actor_state) if t == 0         (the layout already reset it)
            = next_carry_{t-1} otherwise

    next_carry_t, output_t = core(carry_t, torso(observation[t]))

so `carry_t` is exactly what the actor used at step t (up to float rounding: the learner runs
the torso and heads batched over `[T, B]`). `next_carry_t` is the state after step t *before*
any reset; the bootstrap value of `next_observation[t]` (o_{t+1} before auto-reset, used by
GAE / V-trace at every t: mid-rollout truncations and the last step) is

    V(next_observation[t]) = value_head(core(next_carry_t, torso(next_observation[t])))

one more core step per t, batched over `[T, B]`. Where the episode goes on,
`next_observation[t] == observation[t + 1]` and `next_carry_t == carry_{t+1}`, so this is
the value the unroll gives step t+1; where it was truncated, it is the value the actor would
have computed had the episode continued. A terminated step's bootstrap is discounted to 0.

Legal-action masks: `act_step`, `policy_and_value` and `trajectory_outputs` return the logits of a
discrete policy masked by the observation's `action_mask` leaf (`podrl.agents.masking.masked_logits`), so
acting, the PPO and IMPALA losses, their ratios and entropies see legal actions only.

`trajectory_outputs` (the IMPALA learner) uses that equality: it takes the bootstrap of step t
from the unroll's value at t+1 and runs the network on `next_observation` only for the last
step, or for all steps when a minibatch holds a truncation before its last step
(`shifted_bootstrap`). `next_values` (PPO's GAE, once per rollout) computes
V(next_observation) directly.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from podrl.agents.cores import Carry, DistParams, RecurrentActorCritic, is_recurrent, zero_carry
from podrl.agents.masking import action_mask, masked_logits
from podrl.agents.networks import ActorCritic
from podrl.core.types import Trajectory, reset_finished_actor_state

Array = jax.Array
Network = Any  # ActorCritic | RecurrentActorCritic


class Unroll(NamedTuple):
    """A recurrent network over `T` steps of `B` envs.

    Attributes:
      dist_params: `[T, B, ...]` policy parameters at each step.
      value: `[T, B]` V(observation[t]).
      carry: `[T, B, ...]` (each leaf) the core state used at step t, after any reset.
      next_carry: `[T, B, ...]` the core state after step t, before any reset.
    """

    dist_params: DistParams
    value: Array
    carry: Carry
    next_carry: Carry


def reset_before(episode_end: Array) -> Array:
    """`[T, B]` bool: reset the carry before step t, i.e. `episode_end[t - 1]` (False at t = 0)."""
    return jnp.concatenate([jnp.zeros_like(episode_end[:1]), episode_end[:-1]], axis=0)


def unroll_core(network: Any, params: Any, carry: Carry, observation: Array,
                reset: Array) -> tuple[Carry, Carry, Array]:
    """The torso and core of a recurrent network over `observation` `[T, B, *obs]` from `carry` `[B, ...]`,
    the carry set to the zero carry before each step t where `reset[t]` (`[T, B]` bool; the layouts'
    rule is `reset_before(episode_end)`). The network has `features` (torso) and `core_step` methods
    and `core` / `core_size` attributes (`RecurrentActorCritic`, R2D2's Q network).

    Returns `(carry, next_carry, output)`: the carry used at each step (after any reset) and the one
    after it (before any reset), leaves `[T, B, ...]`, and the core's outputs `[T, B, H]`."""
    initial = zero_carry(network.core, network.core_size, reset.shape[1])
    features = network.apply(params, observation, method="features")

    def step(carry, inputs):
        features_t, reset_t = inputs
        carry = reset_finished_actor_state(carry, reset_t, initial)
        next_carry, output = network.apply(params, carry, features_t, method="core_step")
        return next_carry, (carry, next_carry, output)

    _, (carry, next_carry, output) = jax.lax.scan(step, carry, (features, reset))
    return carry, next_carry, output


def unroll(network: RecurrentActorCritic, params: Any, actor_state: Carry, observation: Array,
           episode_end: Array) -> Unroll:
    """Re-unrolls the core from `actor_state` `[B, ...]` over `observation` `[T, B, *obs]`,
    resetting to the zero carry after each `episode_end` `[T, B]` (module docstring)."""
    carry, next_carry, output = unroll_core(network, params, actor_state, observation, reset_before(episode_end))
    dist_params, value = network.apply(params, output, method=RecurrentActorCritic.heads)
    return Unroll(dist_params, value, carry, next_carry)


def bootstrap_values(network: RecurrentActorCritic, params: Any, next_carry: Carry, next_observation: Array) -> Array:
    """`[T, B]` V(next_observation[t]) seen with `next_carry[t]` (each leaf `[T, B, ...]`), the
    state after step t before any reset: one more core step, batched over all `T * B`."""
    t, b = jax.tree.leaves(next_observation)[0].shape[:2]
    flat = lambda x: x.reshape((t * b,) + x.shape[2:])  # noqa: E731
    value = network.apply(params, jax.tree.map(flat, next_observation), jax.tree.map(flat, next_carry),
                          method=RecurrentActorCritic.value)
    return value.reshape(t, b)


def legal(network: Network, dist_params: DistParams, observation: Any) -> DistParams:
    """A discrete policy's logits masked by the observation's `action_mask` leaf (module docstring)."""
    return masked_logits(dist_params, action_mask(observation)) if network.discrete else dist_params


def policy_and_value(network: Network, params: Any, observation: Array, actor_state: Carry = (),
                     episode_end: Array | None = None) -> tuple[DistParams, Array]:
    """`(dist_params, value)` for `observation`: feed-forward `[..., *obs]` directly, recurrent
    `[T, B, *obs]` re-unrolled from `actor_state` `[B, ...]` with resets after `episode_end` `[T, B]`."""
    if not is_recurrent(network):
        dist_params, value = network.apply(params, observation)
        return legal(network, dist_params, observation), value
    rolled = unroll(network, params, actor_state, observation, episode_end)
    return legal(network, rolled.dist_params, observation), rolled.value


def trajectory_outputs(network: Network, params: Any, traj: Trajectory) -> tuple[DistParams, Array, Array]:
    """`(dist_params [T, B, ...], value [T, B], next_value [T, B])` on `traj`: V of the
    observations and the bootstrap values (module docstring, `shifted_bootstrap`)."""
    if not is_recurrent(network):
        dist_params, value = network.apply(params, traj.observation)
        dist_params = legal(network, dist_params, traj.observation)

        def values_of(steps: slice) -> Array:
            return network.apply(params, jax.tree.map(lambda x: x[steps], traj.next_observation),
                                 method=ActorCritic.value)

        return dist_params, value, shifted_bootstrap(value, traj.truncated, values_of)
    rolled = unroll(network, params, traj.actor_state, traj.observation, traj.episode_end)

    def recurrent_values_of(steps: slice) -> Array:
        next_carry = jax.tree.map(lambda x: x[steps], rolled.next_carry)
        return bootstrap_values(network, params, next_carry, jax.tree.map(lambda x: x[steps], traj.next_observation))

    dist_params = legal(network, rolled.dist_params, traj.observation)
    return dist_params, rolled.value, shifted_bootstrap(rolled.value, traj.truncated, recurrent_values_of)


def shifted_bootstrap(value: Array, truncated: Array, values_of: Callable[[slice], Array]) -> Array:
    """`[T, B, ...]` bootstrap values for GAE / V-trace (R2D2: Q values `[T, B, A]`) from `value`
    `[T, B, ...]` (of a trajectory's `observation` with these params; `truncated` its `[T, B]` flags):
    `value[t + 1]` for t < T - 1 and `values_of(slice(T - 1, T))` (of `next_observation[T - 1]`,
    `[1, B, ...]`) for the last step. Where an episode goes on,
    `next_observation[t] == observation[t + 1]` (and a core's state after step t is the one the
    unroll used at t + 1), so this is V(next_observation[t]) without running the network on
    `next_observation` again (an IMPALA SGD step then runs one forward pass and its backward, not
    two forward passes and a backward). At a terminated step (`discount == 0`) it is
    V of the reset observation instead, which GAE and V-trace discount to 0. Only a truncation
    before the last step needs V of its own `next_observation` (a time limit's o_{t+1} is not the
    reset `observation[t + 1]`): a minibatch with one takes `values_of(slice(None))` for all `T`
    steps (`lax.cond`; under `vmap` both branches run)."""

    def shifted() -> Array:
        return jnp.concatenate([value[1:], values_of(slice(-1, None)).astype(value.dtype)], axis=0)

    def direct() -> Array:
        return values_of(slice(None)).astype(value.dtype)

    return jax.lax.cond(jnp.any(truncated[:-1]), direct, shifted)


def next_values(network: Network, params: Any, traj: Trajectory) -> Array:
    """`[T, B]` V(traj.next_observation), the bootstrap values alone (see `trajectory_outputs`)."""
    if not is_recurrent(network):
        return network.apply(params, traj.next_observation, method=ActorCritic.value)
    return trajectory_outputs(network, params, traj)[2]


def act_step(network: Network, params: Any, actor_state: Carry, observation: Array) -> tuple[DistParams, Array, Carry]:
    """One acting step on `observation` `[B, *obs]`: `(dist_params, value [B], actor_state)`
    (a feed-forward network returns `actor_state` unchanged, `()`)."""
    if not is_recurrent(network):
        dist_params, value = network.apply(params, observation)
        return legal(network, dist_params, observation), value, actor_state
    dist_params, value, actor_state = network.apply(params, observation, actor_state)
    return legal(network, dist_params, observation), value, actor_state


def env_minibatches(steps: Any, actor_state: Carry, m: int) -> tuple[Any, Carry]:
    """Splits time-major `steps` (leaves `[T, B, ...]`) and `actor_state` (leaves `[B, ...]`)
    along the env axis into `m` groups of whole sequences: `[m, T, B / m, ...]` and
    `[m, B / m, ...]`; env columns `i * B/m ..` go to group i, time stays whole and in order."""

    def split(x, axis):
        shape = x.shape[:axis] + (m, x.shape[axis] // m) + x.shape[axis + 1:]
        return jnp.moveaxis(x.reshape(shape), axis, 0)

    return jax.tree.map(lambda x: split(x, 1), steps), jax.tree.map(lambda x: split(x, 0), actor_state)
