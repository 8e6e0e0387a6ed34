"""Prioritised sequence replay: a `podrl.agents.replay` ring of env steps and a sum tree over the
sequences that start every `period` steps of each env, as pure functions (R2D2; DQN as Ape-X).

Like `podrl.agents.replay.ReplayBuffer` it is a pytree that an agent keeps in
`TrainState.shard_state`, one per learner shard; its shapes depend on `capacity` and `period` alone
(not on the envs per shard, which the layouts decide after `Agent.init`), so the layouts shard,
checkpoint and size-check it like any buffer.

    replay = init(capacity, example_step, period, example_start_state)
    replay = add(replay, SequenceItems(steps [T, B], start_state [T / period, B]), window, period, alpha)
    drawn = sample(replay, key, n, window, period, B)       # windows [n, window], their start states
    weights = importance_weights(drawn.probability, beta)    # [n]
    priorities = set_priorities(replay.priorities, drawn.index, new_priority [n], alpha)

**Layout.** Steps are added as whole `[T, B]` rollouts flattened time-major, so the ring holds
`capacity / B` rows of B env columns, env b at the slots = b (mod B) (as MuZero's sequence replay).
A *sequence* is `window` consecutive steps of one env from a row r with r = 0 (mod `period`): the
sequences of an env overlap by `window - period` steps (R2D2: 80-step sequences every 40 steps).
Sequence (r, b) is leaf `(r / period) * B + b` of the sum tree (`capacity / period` leaves) and
keeps a start state there (R2D2: the actor's recurrent state before step r). Sequences cross
episode ends: the learner resets its core and cuts its n-step returns there (`podrl.agents.r2d2`).

**Priorities** (Schaul et al. 2016, "Prioritized Experience Replay", ICLR, sec. 3.3): a leaf holds
p^alpha (alpha = `priority_exponent`) and `sample` draws sequence i with P(i) = p_i^alpha /
sum_k p_k^alpha. A leaf is 0 unless its whole window is stored in the order it was written: a
sequence becomes drawable when the add that completes it lands (with the largest priority seen so
far, `Priorities.max_priority`, so new data is replayed soon: Schaul et al., Algorithm 1, line 6)
and stops when an add overwrites any of its steps; nothing else changes a leaf but
`set_priorities`. Importance weights w_i = (N P(i))^-beta / max_j w_j over the drawn batch
(Schaul et al. sec. 3.4, normalised by the batch's largest as Ape-X and Acme do; N cancels).
`sequence_priority` mixes a sequence's TD errors as R2D2 does (Kapturowski et al. 2019, sec. 2):
p = eta max_t |delta_t| + (1 - eta) mean_t |delta_t|.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from podrl.agents import replay as replay_lib
from podrl.agents import sum_tree
from podrl.agents.config_checks import sequence_layout_problem

Array = jax.Array

PRIORITY_FLOOR = 1e-6
"""Priorities are at least this, so a stored sequence whose TD errors were all 0 can still be drawn."""


class Priorities(NamedTuple):
    """What `set_priorities` changes between gradient steps (carried through them by the replay frame).

    Attributes:
      tree: the `podrl.agents.sum_tree.SumTree` of p^alpha per sequence (0: not drawable).
      max_priority: float32 `[]`, the largest priority p set so far (1 at first): what new sequences get.
    """

    tree: sum_tree.SumTree
    max_priority: Array


class PrioritisedReplay(NamedTuple):
    """A shard's prioritised sequence replay (module docstring).

    Attributes:
      steps: the ring of env steps, a `podrl.agents.replay.ReplayBuffer` of `capacity` items.
      start_state: each sequence's start state, leaves `[capacity / period, ...]` (() if none).
      priorities: its `Priorities`.
    """

    steps: replay_lib.ReplayBuffer
    start_state: Any
    priorities: Priorities

    @property
    def size(self) -> Array:
        """int32 `[]`: steps stored."""
        return self.steps.size


class SequenceItems(NamedTuple):
    """One rollout as `add` takes it.

    Attributes:
      steps: the steps, leaves `[T, B, ...]` (time-major).
      start_state: the start states of the sequences beginning at its steps 0, period, 2 period, ...,
        leaves `[T / period, B, ...]` (() if none).
    """

    steps: Any
    start_state: Any


class Sample(NamedTuple):
    """`n` sequences drawn by priority.

    Attributes:
      window: their steps, leaves `[n, window, ...]`.
      start_state: their start states, leaves `[n, ...]`.
      index: int32 `[n]`, the sequences (sum-tree leaves) drawn: what `set_priorities` takes.
      probability: float32 `[n]`, P(i) each was drawn with.
    """

    window: Any
    start_state: Any
    index: Array
    probability: Array


def init(capacity: int, example_step: Any, period: int, example_start_state: Any = ()) -> PrioritisedReplay:
    """An empty replay of `capacity` steps shaped like `example_step`, one sequence (and start state
    shaped like `example_start_state`) every `period` steps; ValueError unless period divides capacity."""
    if not isinstance(period, int) or period < 1 or capacity % period:
        raise ValueError(f"period: expected a positive int dividing capacity {capacity}, got {period!r}")
    num_sequences = capacity // period
    start_state = jax.tree.map(lambda x: jnp.zeros((num_sequences,) + tuple(x.shape), x.dtype), example_start_state)
    priorities = Priorities(sum_tree.init(num_sequences), jnp.ones((), jnp.float32))
    return PrioritisedReplay(replay_lib.init(capacity, example_step), start_state, priorities)


def add(replay: PrioritisedReplay, items: SequenceItems, window: int, period: int,
        priority_exponent: float) -> PrioritisedReplay:
    """`replay` with the rollout `items` written at its position (module docstring): the sequences it
    completes drawable at the largest priority so far, those whose steps it overwrote not."""
    t, columns = jax.tree.leaves(items.steps)[0].shape[:2]
    capacity = replay.steps.capacity
    problem = sequence_layout_problem(capacity, t, columns, window, period)
    if problem:
        raise ValueError(problem)
    rows = capacity // columns
    row = replay.steps.position // columns  # the row this rollout's step 0 goes to (a multiple of period)
    steps = replay_lib.add(replay.steps, jax.tree.map(lambda x: x.reshape((t * columns,) + x.shape[2:]), items.steps))
    size_rows = steps.size // columns
    oldest = (row + t - size_rows) % rows
    before = (window - 1) // period  # earlier starts whose windows reach into this rollout
    start_row = (row + period * jnp.arange(-before, t // period, dtype=jnp.int32)) % rows
    complete = (start_row - oldest) % rows <= size_rows - window  # the whole window stored, oldest to newest
    leaf = (start_row // period)[:, None] * columns + jnp.arange(columns, dtype=jnp.int32)[None, :]
    value = jnp.where(complete, replay.priorities.max_priority ** priority_exponent, 0.0)
    tree = sum_tree.update(replay.priorities.tree, leaf.reshape(-1),
                           jnp.broadcast_to(value[:, None], leaf.shape).reshape(-1))
    new = leaf[before:].reshape(-1)  # the sequences starting in this rollout: their start states
    start_state = jax.tree.map(lambda store, x: store.at[new].set(x.reshape((-1,) + x.shape[2:]).astype(store.dtype)),
                               replay.start_state, items.start_state)
    return PrioritisedReplay(steps, start_state, replay.priorities._replace(tree=tree))


def sample(replay: PrioritisedReplay, key: Array, n: int, window: int, period: int, columns: int) -> Sample:
    """`n` sequences drawn with P(i) = p_i^alpha / sum_k p_k^alpha (with replacement), from a replay fed
    rollouts of `columns` envs. From a replay with no drawable sequence it returns sequence 0; callers
    gate learning on the fill."""
    capacity = replay.steps.capacity
    index = sum_tree.sample(replay.priorities.tree, key, n)
    first = (index // columns) * period * columns + index % columns
    slots = (first[:, None] + columns * jnp.arange(window, dtype=jnp.int32)[None, :]) % capacity
    window_steps = jax.tree.map(lambda store: store[slots], replay.steps.data)
    start_state = jax.tree.map(lambda store: store[index], replay.start_state)
    return Sample(window_steps, start_state, index, sum_tree.probability(replay.priorities.tree, index))


def importance_weights(probability: Array, exponent: float | Array) -> Array:
    """float32 `[n]`: (N P(i))^-beta normalised by the batch's largest (N cancels), beta = `exponent`."""
    weight = jnp.maximum(probability, jnp.finfo(jnp.float32).tiny) ** -exponent
    return weight / jnp.max(weight)


class PendingPriorities(NamedTuple):
    """New priorities not yet in the tree: a gradient step's draws, which the next step writes (`settle`)
    before it samples. A `lax.scan` step that samples its carried tree and then writes it makes XLA:CPU
    copy the whole tree every step (1.1 ms a step for 400k leaves, against 0.13 ms written first and
    sampled after; jax 0.10.2), so the replay frame carries these between steps.

    Attributes:
      index: int32 `[n]` sum-tree leaves. leaf: float32 `[n]` their values p^alpha.
    """

    index: Array
    leaf: Array


def nothing_pending(priorities: Priorities, n: int) -> PendingPriorities:
    """`n` pending writes that change nothing (leaf 0 rewritten with its own value)."""
    return PendingPriorities(jnp.zeros((n,), jnp.int32),
                             jnp.broadcast_to(sum_tree.leaves(priorities.tree)[0], (n,)))


def defer_priorities(priorities: Priorities, index: Array, priority: Array,
                     exponent: float) -> tuple[Priorities, PendingPriorities]:
    """`set_priorities` without the tree write: the largest priority seen moved up, and the writes pending."""
    priority = jnp.maximum(jax.lax.stop_gradient(priority).astype(jnp.float32), PRIORITY_FLOOR)
    pending = PendingPriorities(index.astype(jnp.int32), priority ** exponent)
    return priorities._replace(max_priority=jnp.maximum(priorities.max_priority, jnp.max(priority))), pending


def settle(priorities: Priorities, pending: PendingPriorities) -> Priorities:
    """`priorities` with the `pending` leaf values written into its tree."""
    return priorities._replace(tree=sum_tree.update(priorities.tree, pending.index, pending.leaf))


def set_priorities(priorities: Priorities, index: Array, priority: Array, exponent: float) -> Priorities:
    """Sequences `index` `[n]` get priority `priority` `[n]` (floored at `PRIORITY_FLOOR`), stored as
    p^alpha (alpha = `exponent`); the largest priority seen moves up with them."""
    return settle(*defer_priorities(priorities, index, priority, exponent))


def sequence_priority(td_abs: Array, eta: float) -> Array:
    """`[n]` priorities of `n` sequences' absolute TD errors `[n, m]`: eta max_t + (1 - eta) mean_t
    (R2D2, Kapturowski et al. 2019, sec. 2: eta 0.9); with m = 1 it is |delta| (Ape-X)."""
    return eta * jnp.max(td_abs, axis=-1) + (1.0 - eta) * jnp.mean(td_abs, axis=-1)


def refill(replays: PrioritisedReplay, count: int) -> tuple[PrioritisedReplay, dict[str, int]]:
    """`Agent.reshard_state` of prioritised replays (host arrays, leaves `[D, ...]`): a sequence's steps
    and priority follow its shard's env columns, which another shard count changes, so `count` empty
    replays of the same capacity (max priority 1, as `init`), which training refills; returns them and
    `{"kept": 0, "dropped": steps}` (the step rings go through `replay.refill`)."""
    steps, counts = replay_lib.refill(replays.steps, count)
    empty = jax.tree.map(lambda x: np.zeros((count,) + np.shape(x)[1:], np.asarray(x).dtype),
                         (replays.start_state, replays.priorities))
    start_state, priorities = empty
    priorities = priorities._replace(max_priority=np.ones_like(priorities.max_priority))
    return PrioritisedReplay(steps, start_state, priorities), counts
