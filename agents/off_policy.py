"""What the replay agents (DQN, SAC, TD3) share in `update`: add the rollout to this shard's
buffer, then, once it holds enough, scan gradient steps over samples of it.

    buffer, carry, metrics, learning = replay_and_learn(
        buffer, items, update_step, min_fill, num_steps, sgd_step, carry, key)

`sgd_step(buffer, carry, key) -> (carry, metrics {name: []})` is the agent's own step (it
samples the buffer itself). Every learner shard adds the same number of items per update,
so the fill, and with it the learning predicate, is a function of `update_step` alone: the
same on every shard, which lets the gradient steps (and their `pmean`s) run inside a
`lax.cond`. Before learning starts the metrics are zeros of the learned ones' shapes. Nothing
here knows devices, threads or layouts.

Also shared by DQN and MuZero: `per_update_optimizer` (the step size annealed per update, set
into the optimizer state before an update's gradient steps) and `target_update` (periodic
Polyak / hard copy of a target network).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from podrl.agents import replay
from podrl.agents.actor_critic import base_optimizer, clipped_flat_optimizer, lr_schedule
from podrl.core.parallel import mean_across_learners, vary_like
from podrl.core.types import Metrics

Array = jax.Array
SGDStep = Callable[[replay.ReplayBuffer, Any, Array], tuple[Any, Metrics]]


def learning_started(update_step: Array, items_per_update: int, min_fill: int) -> Array:
    """bool `[]`: after this update's add the shard's buffer holds at least `min_fill` items
    (`update_step`: updates applied before this one; each adds `items_per_update`)."""
    return update_step + 1 >= -(-min_fill // items_per_update)


def _learn(sgd_step: SGDStep, buffer: replay.ReplayBuffer, num_steps: int, carry, key: Array):
    """`num_steps` scanned `sgd_step`s; their metrics meaned over the steps and over learners."""
    carry, metrics = jax.lax.scan(functools.partial(sgd_step, buffer), carry, jax.random.split(key, num_steps))
    return carry, mean_across_learners(jax.tree.map(jnp.mean, metrics))


def replay_and_learn(buffer: replay.ReplayBuffer, items: Any, update_step: Array, min_fill: int, num_steps: int,
                     sgd_step: SGDStep, carry: Any, key: Array) -> tuple[replay.ReplayBuffer, Any, Metrics, Array]:
    """Adds `items` (leaves `[N, ...]`) to `buffer`, then `num_steps` gradient steps from `carry`
    if the buffer holds `min_fill` items (`learning_started`), else `carry` unchanged.

    Returns `(buffer, carry, metrics, learning)`: metrics averaged over steps and learners (zeros
    while not learning), `learning` bool `[]`. Metrics "learning" (0/1) and "replay_fill" (the
    shard's filled slots, averaged over learners) are added."""
    n = jax.tree.leaves(items)[0].shape[0]
    buffer = replay.add(buffer, items)
    learning = learning_started(update_step, n, min_fill)
    learn = functools.partial(_learn, sgd_step, buffer, num_steps)
    skipped = jax.tree.map(lambda m: jnp.zeros(m.shape, m.dtype), jax.eval_shape(learn, carry, key)[1])
    # the learned metrics vary like the train state (e.g. per population member); so must the zeros
    skipped = vary_like(skipped, update_step)
    carry, metrics = jax.lax.cond(learning, learn, lambda c, _: (c, skipped), carry, key)
    metrics = {**metrics, "learning": learning.astype(jnp.float32),
               "replay_fill": mean_across_learners(buffer.size.astype(jnp.float32))}
    return buffer, carry, metrics, learning


def per_update_optimizer(config: Any, total_updates: int,
                         num_params: int | None = None) -> tuple[optax.GradientTransformation, Any]:
    """`(optimizer, schedule)`: global-norm clip then the config's optimizer, whose step size the
    update sets to `schedule(update_step)` (an injected hyperparameter, `set_learning_rate`) before
    its gradient steps: their number per update depends on the rollout shape, so the anneal is per update."""
    schedule = lr_schedule(config.learning_rate, config.anneal_lr, total_updates)
    base = base_optimizer(config, config.learning_rate, inject=True)
    return clipped_flat_optimizer(config.max_grad_norm, base, num_params), schedule


def set_learning_rate(opt_state: Any, learning_rate: Array) -> Any:
    """`opt_state` of a `per_update_optimizer` with its step size set to `learning_rate`."""
    return optax.tree_utils.tree_set(opt_state, learning_rate=learning_rate)


def target_update(target: Any, online: Any, sgd_steps: Array, period: int, tau: float) -> Any:
    """Every `period` gradient steps (`sgd_steps` taken so far): target <- tau * online + (1 - tau) * target."""
    due = sgd_steps % period == 0
    moved = optax.incremental_update(online, target, tau)
    return jax.tree.map(lambda new, old: jnp.where(due, new, old), moved, target)
