"""The replay update frame of DQN, MuZero, SAC, TD3 and R2D2, and the target-network step of DQN, MuZero and R2D2.

**Frame.** `replay_update(pieces, train_state, trajectory [T, B], key)` is their `Agent.update`: it
checks the rollout, adds it to this shard's buffer (`TrainState.shard_state`), then, once the buffer
holds `pieces.min_fill` items, scans `config.sgd_steps(T, B)` of the agent's gradient steps over
`(learned params, opt_state)`, each sampling the buffer itself (`replay_and_learn`). With a
`pieces.learning_rate` schedule (a `podrl.agents.optimizers.per_update_optimizer`) it first sets this
update's step size into `opt_state.optimizer`. An agent gives only its own `ReplayPieces`: what to
add (and how: `replay.add`, or `prioritised.add` into a prioritised replay, whose priorities the
gradient steps then carry and change), its gradient step (how it samples, its loss), which params
the steps move and what it hands on.

Every learner shard adds the same number of items per update, so the fill, and with it the
learning predicate, is a function of `update_step` alone: the same on every shard, which lets
the gradient steps (and their `pmean`s) run inside a `lax.cond`. Before learning starts the
metrics are zeros of the learned ones' shapes.

**Target networks.** DQN, MuZero and R2D2 keep a `TargetLearnerState` (optimizer state, target params,
gradient steps taken); `target_sgd_step` is their gradient step: the agent's batch from a sample of
the buffer (bootstrapping from the target params), one `podrl.agents.actor_critic.sgd_step`, then
`target_update` (periodic Polyak / hard copy), and with a prioritised replay the drawn sequences'
new priorities. Nothing here knows devices, threads or layouts.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from podrl.agents import prioritised, replay
from podrl.agents.actor_critic import sgd_step
from podrl.agents.optimizers import set_learning_rate
from podrl.core.parallel import match_varying, vary_across_learners, vary_like
from podrl.core.types import Metrics, TrainState, Trajectory

Array = jax.Array
SGDStep = Callable[[Any, Any, Array], tuple[Any, Metrics]]
"""`(buffer, (learned params, opt_state), key) -> (carry, metrics {name: []})`: one gradient step, a
`lax.scan` body; it samples `buffer` itself (with a prioritised replay the carry holds its priorities too)."""


class ReplayParts(NamedTuple):
    """What a replay agent's pure functions close over (MuZero, R2D2); `config`, `optimizer`, `grad_fn`,
    `hyperparams` are the fields `podrl.agents.actor_critic.sgd_step` reads."""

    config: Any  # the agent's frozen config
    network: Any  # its flax network
    optimizer: optax.GradientTransformation
    learning_rate: Callable[[Array], Array]  # update step -> step size
    grad_fn: Callable[..., Any]  # jax.value_and_grad(loss_fn, has_aux=True)
    env_spec: Any  # the env's `podrl.envs.types.EnvSpec`
    hyperparams: Any = None  # none swept: `sgd_step` calls the loss with (params, batch, key)


class ReplayPieces(NamedTuple):
    """What a replay agent gives `replay_update`: its own pieces (static, built with the agent)."""

    config: Any  # the agent's frozen config, a `ReplayConfig`: check_batch(T, B), sgd_steps(T, B)
    min_fill: int  # items this shard's buffer holds before the first gradient step
    items: Callable[[Trajectory], Any]  # the [T, B] rollout -> the items to add, leaves [T * B, ...]
    sgd_step: Callable[[int], SGDStep]  # B (envs per shard) -> the gradient step for that rollout
    learned: Callable[[Any], Any]  # TrainState.params -> the tree the gradient steps move
    hand_on: Callable[[TrainState, Any, Trajectory], tuple[Any, Metrics]]
    # (train state before, learned params after, rollout) -> (the next params, the rollout's metrics)
    learning_rate: Callable[[Array], Array] | None = None  # update step -> step size; None: constant
    add: Callable[[Any, Any], Any] = replay.add  # (buffer, items) -> buffer: a `prioritised.add` for that replay


def same_step(step: SGDStep) -> Callable[[int], SGDStep]:
    """`ReplayPieces.sgd_step` of an agent whose gradient step is the same for any envs per shard."""
    return lambda envs_per_shard: step


def learning_started(update_step: Array, items_per_update: int, min_fill: int) -> Array:
    """bool `[]`: after this update's add the shard's buffer holds at least `min_fill` items
    (`update_step`: updates applied before this one; each adds `items_per_update`)."""
    return update_step + 1 >= -(-min_fill // items_per_update)


def _learn(sgd_step: SGDStep, buffer: Any, num_steps: int, carry, key: Array):
    """`num_steps` scanned `sgd_step`s; their metrics meaned over the steps (this shard's: the layout
    averages them over the learner shards)."""
    carry, metrics = jax.lax.scan(functools.partial(sgd_step, buffer), carry, jax.random.split(key, num_steps))
    return carry, jax.tree.map(jnp.mean, metrics)


def replay_and_learn(buffer: Any, items: Any, added: int, update_step: Array, min_fill: int, num_steps: int,
                     sgd_step: SGDStep, carry: Any, key: Array, add: Callable[[Any, Any], Any] = replay.add,
                     batch_size: int = 0) -> tuple[Any, Any, Metrics, Array]:
    """Adds `items` (`added` env steps, e.g. leaves `[N, ...]` for `replay.add`) to `buffer` with `add`, then
    `num_steps` gradient steps from `carry` if the buffer holds `min_fill` items (`learning_started`),
    else `carry` unchanged. With a `prioritised.PrioritisedReplay` the steps also carry its
    priorities and the new priorities of the last step's `batch_size` draws, which the next step
    writes before it samples (`target_sgd_step`, `prioritised.PendingPriorities`).

    Returns `(buffer, carry, metrics, learning)`: metrics averaged over steps (zeros while not
    learning; the layout averages them over learners), `learning` bool `[]`. Metrics "learning"
    (0/1) and "replay_fill" (the shard's filled slots) are added."""
    buffer = add(buffer, items)
    learning = learning_started(update_step, added, min_fill)
    has_priorities = isinstance(buffer, prioritised.PrioritisedReplay)
    if has_priorities:  # the steps' draws differ by shard, so their priorities vary over the learners
        priorities = vary_across_learners(buffer.priorities)
        pending = vary_like(prioritised.nothing_pending(priorities, batch_size), priorities.tree.nodes)
        carry = (carry, (priorities, pending))
    learn = functools.partial(_learn, sgd_step, buffer, num_steps)
    shapes = jax.eval_shape(learn, carry, key)[1]
    # the learned metrics vary like the train state (per population member) and the sampled batch (per
    # learner shard); so must the zeros, leaf by leaf
    skipped = match_varying(jax.tree.map(lambda m: jnp.zeros(m.shape, m.dtype), shapes), shapes)
    carry, metrics = jax.lax.cond(learning, learn, lambda c, _: (c, skipped), carry, key)
    if has_priorities:
        carry, (priorities, pending) = carry
        buffer = buffer._replace(priorities=prioritised.settle(priorities, pending))
    metrics = {**metrics, "learning": learning.astype(jnp.float32),
               "replay_fill": buffer.size.astype(jnp.float32)}
    return buffer, carry, metrics, learning


def _with_step_size(pieces: ReplayPieces, train_state: TrainState) -> tuple[Any, Metrics]:
    """`(opt_state, metrics)`: with a `pieces.learning_rate` schedule, `opt_state.optimizer` with this
    update's step size set and metric "learning_rate"; else `opt_state` as it is and no metric."""
    opt_state = train_state.opt_state
    if pieces.learning_rate is None:
        return opt_state, {}
    learning_rate = pieces.learning_rate(train_state.update_step)
    opt_state = opt_state._replace(optimizer=set_learning_rate(opt_state.optimizer, learning_rate))
    return opt_state, {"learning_rate": jnp.asarray(learning_rate, jnp.float32)}


def replay_update(pieces: ReplayPieces, train_state: TrainState, traj: Trajectory,
                  key: Array) -> tuple[TrainState, Metrics]:
    """`Agent.update` of a replay agent on this shard's trajectory `[T, B]` (see the module docstring).
    Metrics `[]`: the gradient steps' (zeros before learning starts), "learning", "replay_fill", the
    agent's rollout metrics (`hand_on`) and, annealed per update, "learning_rate"."""
    cfg = pieces.config
    traj.validate()
    t, b = traj.reward.shape
    cfg.check_batch(t, b)
    opt_state, step_size_metrics = _with_step_size(pieces, train_state)
    carry = (pieces.learned(train_state.params), opt_state)
    buffer, (learned, opt_state), metrics, _ = replay_and_learn(
        train_state.shard_state, pieces.items(traj), t * b, train_state.update_step, pieces.min_fill,
        cfg.sgd_steps(t, b), pieces.sgd_step(b), carry, key, pieces.add, cfg.batch_size)
    params, rollout_metrics = pieces.hand_on(train_state, learned, traj)
    next_state = train_state._replace(params=params, opt_state=opt_state, update_step=train_state.update_step + 1,
                                      shard_state=buffer)
    return next_state, {**metrics, **rollout_metrics, **step_size_metrics}


class TargetLearnerState(NamedTuple):
    """`TrainState.opt_state` of DQN and MuZero: the learner-only state besides the buffer (the same on every shard).

    Attributes:
      optimizer: the optimizer state (`per_update_optimizer`) over the learned params.
      target: the target network's params, a tree like the learned params.
      sgd_steps: int32 `[]`, gradient steps taken (drives `target_update_period`).
    """

    optimizer: Any
    target: Any
    sgd_steps: Array


def init_target_learner(optimizer_state: Any, params: Any) -> TargetLearnerState:
    """The first `TargetLearnerState`: `optimizer_state`, the target a copy of `params`, no steps taken."""
    return TargetLearnerState(optimizer_state, params, jnp.zeros((), jnp.int32))


def target_update(target: Any, online: Any, sgd_steps: Array, period: int, tau: float) -> Any:
    """Every `period` gradient steps (`sgd_steps` taken so far): target <- tau * online + (1 - tau) * target."""
    due = sgd_steps % period == 0
    moved = optax.incremental_update(online, target, tau)
    return jax.tree.map(lambda new, old: jnp.where(due, new, old), moved, target)


def target_sgd_step(parts: Any, batch: Callable[[Any, Array, Any, Any], Any], buffer: Any, carry, key: Array):
    """One optimizer step on `batch(buffer, sample key, params, target params)` (the agent's batch of a
    sample of `buffer`), then the step counted and `target_update` (the config's
    `target_update_period`, `target_tau`); an `SGDStep` over `(params, TargetLearnerState)`.

    With a `prioritised.PrioritisedReplay` buffer the carry is `((params, TargetLearnerState),
    (Priorities, PendingPriorities))`: the step first writes the previous step's pending priorities,
    then its batch samples by the priorities and names what it drew (its `index` `[N]`), and the loss
    returns their new priorities (metric "priority" `[N]`, taken out of the metrics), left pending
    with the config's `priority_exponent` (written first thing next step, or after the last step)."""
    has_priorities = isinstance(buffer, prioritised.PrioritisedReplay)
    if has_priorities:
        carry, (priorities, pending) = carry
        buffer = buffer._replace(priorities=prioritised.settle(priorities, pending))
    params, learner = carry
    sample_key, step_key = jax.random.split(key)
    minibatch = batch(buffer, sample_key, params, learner.target)
    (params, optimizer), metrics = sgd_step(parts, step_key, (params, learner.optimizer), minibatch)
    sgd_steps = learner.sgd_steps + 1
    target = target_update(learner.target, params, sgd_steps, parts.config.target_update_period,
                           parts.config.target_tau)
    carry = (params, TargetLearnerState(optimizer, target, sgd_steps))
    if not has_priorities:
        return carry, metrics
    metrics = dict(metrics)
    priorities = prioritised.defer_priorities(buffer.priorities, minibatch.index, metrics.pop("priority"),
                                              parts.config.priority_exponent)
    return (carry, priorities), metrics
