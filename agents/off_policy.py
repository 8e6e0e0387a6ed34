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
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from agents import replay
from podrl.parallel import mean_across_learners, vary_like
from podrl.types import Metrics

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
