"""A uniform replay ring buffer as pure functions, and n-step transitions from a trajectory.

The buffer is a pytree, so it lives wherever its owner puts it: value-based agents
keep it in `TrainState.shard_state`, one buffer per learner shard on the learner
devices, filled and sampled inside `Agent.update` (nothing here knows about
shards or devices).

    buffer = init(capacity, example)                 # example: one item, no leading axis
    buffer = add(buffer, items)                      # items: [N, ...], N <= capacity
    batch = sample(buffer, key, batch_size)          # [batch_size, ...], uniform over filled slots
    windows = sample_windows(buffer, key, batch_size, length, stride)   # [batch_size, length, ...]

Items are stored as given: uint8 pixels stay uint8. `transitions(trajectory,
n, gamma)` turns a time-major `[T, B]` rollout into `T * B` n-step `Transition`s
(Sutton & Barto 2018, sec. 7.1; Hessel et al. 2018, "Rainbow"), so the learner
needs only `(o_t, a_t, R_t, discount_t, o_{t+m})` per sample.

Sequences: a buffer that is fed whole `[T, B]` rollouts flattened time-major (`T * B` items per
add, `capacity` a multiple of `B`) keeps env column b in the slots `= b (mod B)`, so one env's
consecutive steps sit `B` slots apart; `sample_windows(..., stride=B)` draws windows of
consecutive steps of one env that never cross the write position (MuZero's K + n step windows).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from podrl.core.types import Trajectory
from podrl.envs import observations
from podrl.envs.types import EnvSpec

Array = jax.Array


class ReplayBuffer(NamedTuple):
    """A ring buffer of `capacity` items.

    Attributes:
      data: the items, every leaf `[capacity, ...]`; slots `[0, size)` hold data.
      position: int32 `[]`, the slot the next item goes to.
      size: int32 `[]`, filled slots (grows to `capacity`, then stays).
    """

    data: Any
    position: Array
    size: Array

    @property
    def capacity(self) -> int:
        return jax.tree.leaves(self.data)[0].shape[0]


class Transition(NamedTuple):
    """One (n-step) transition; batched, every field leads with `[N]`.

    Attributes:
      observation: `[*obs]` o_t, as the env gave it (uint8 stays uint8).
      action: `[*act]` a_t.
      reward: float32 `[]`, R_t = sum_{k<m} gamma^k r_{t+k}, m <= n steps (fewer at an
        episode end or the end of the rollout).
      discount: float32 `[]`, gamma^m times the env discounts: 0 if the episode
        terminated within the m steps, gamma^m if it continues or was truncated.
      next_observation: `[*obs]` o_{t+m}, the observation to bootstrap from (before
        any auto-reset, so truncation bootstraps from the true last state).
    """

    observation: Array
    action: Array
    reward: Array
    discount: Array
    next_observation: Array


def example_transition(env_spec: EnvSpec) -> Transition:
    """One stored 1- or n-step `Transition`'s shapes and dtypes for `env_spec`: observations keep the
    env's dtype (uint8 pixels stay uint8); a discrete action is int32 `[]`, a continuous one float32
    `[*action_shape]` (as the env takes it); reward and discount float32 `[]`."""
    obs = observations.structs(env_spec.observation)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    if env_spec.discrete:
        action = jax.ShapeDtypeStruct((), jnp.int32)
    else:
        action = jax.ShapeDtypeStruct(tuple(env_spec.action.shape), jnp.float32)
    return Transition(obs, action, scalar, scalar, obs)


def item_bytes(example: Any) -> int:
    """Bytes one stored item takes (`example`: arrays or ShapeDtypeStructs, no leading axis), e.g. 44 for
    `example_transition` of CartPole (two 4-float observations, an int32 action, reward, discount)."""
    return sum(math.prod(x.shape) * jnp.dtype(x.dtype).itemsize for x in jax.tree.leaves(example))


def init(capacity: int, example: Any) -> ReplayBuffer:
    """An empty buffer of `capacity` items shaped like `example` (arrays or ShapeDtypeStructs, no leading axis)."""
    if not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"capacity: expected a positive int, got {capacity!r}")
    data = jax.tree.map(lambda x: jnp.zeros((capacity,) + tuple(x.shape), x.dtype), example)
    return ReplayBuffer(data, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))


def add(buffer: ReplayBuffer, items: Any) -> ReplayBuffer:
    """Writes `items` (leaves `[N, ...]`, N <= capacity) at `position` onwards, wrapping around."""
    capacity = buffer.capacity
    n = jax.tree.leaves(items)[0].shape[0]
    if n > capacity:
        raise ValueError(f"cannot add {n} items to a buffer of capacity {capacity} at once")
    slots = (buffer.position + jnp.arange(n, dtype=jnp.int32)) % capacity
    data = jax.tree.map(lambda store, x: store.at[slots].set(x.astype(store.dtype)), buffer.data, items)
    return ReplayBuffer(data, (buffer.position + n) % capacity, jnp.minimum(buffer.size + n, capacity))


def sample(buffer: ReplayBuffer, key: Array, batch_size: int) -> Any:
    """`batch_size` items drawn uniformly (with replacement) from the filled slots `[0, size)`.

    From an empty buffer it returns slot 0's zeros; callers gate learning on `size`."""
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return jax.tree.map(lambda store: store[index], buffer.data)


def sample_windows(buffer: ReplayBuffer, key: Array, batch_size: int, length: int, stride: int) -> Any:
    """`batch_size` windows `[batch_size, length, ...]` of the items at slots s, s + stride, ...,
    s + (length - 1) stride (mod capacity), s drawn uniformly (with replacement) among the starts
    whose whole window lies in the filled slots in the order they were written (oldest first), so
    no window joins the newest items to the oldest.

    With items added as flattened `[T, B]` rollouts and `stride = B` a window is `length`
    consecutive steps of one env (see the module docstring). While fewer than
    `(length - 1) * stride + 1` items are stored it returns windows from slot 0 on; callers gate
    learning on `size`."""
    capacity = buffer.capacity
    oldest = (buffer.position - buffer.size) % capacity
    starts = jnp.maximum(buffer.size - (length - 1) * stride, 1)
    offset = jax.random.randint(key, (batch_size,), 0, starts)
    index = (oldest + offset[:, None] + stride * jnp.arange(length)[None, :]) % capacity
    return jax.tree.map(lambda store: store[index], buffer.data)


def n_step_targets(r_t: Array, discount_t: Array, episode_end_t: Array, n: int, gamma: float):
    """n-step returns of one sequence `[T]`, cut at episode ends and at the sequence end.

    Args:
      r_t: `[T]` rewards r_{t+1} for the action at t.
      discount_t: `[T]` env discounts (0 where the episode terminated at t+1).
      episode_end_t: `[T]` bool, the episode ended (terminated or truncated) at t+1.
    Returns:
      `(R_t [T], discount [T], last [T] int32)`: the return over m <= n steps, the
      bootstrap weight gamma^m * prod(discounts), and t + m - 1 (whose next
      observation is the bootstrap observation).
    """
    size = r_t.shape[0]
    t = jnp.arange(size)
    ret = jnp.zeros(size, jnp.float32)
    weight = jnp.ones(size, jnp.float32)
    last = t
    alive = jnp.ones(size, bool)
    for k in range(n):
        j = jnp.minimum(t + k, size - 1)
        valid = alive & (t + k < size)
        ret = ret + jnp.where(valid, weight * r_t[j], 0.0)
        weight = jnp.where(valid, weight * gamma * discount_t[j], weight)
        last = jnp.where(valid, j, last)
        alive = valid & ~episode_end_t[j]
    return ret, weight, last.astype(jnp.int32)


def transitions(trajectory: Trajectory, n: int, gamma: float, reward: Array | None = None) -> Transition:
    """The `T * B` n-step transitions of a `[T, B]` trajectory (time-major order flattened).

    `reward` (`[T, B]`) replaces `trajectory.reward` (e.g. clipped rewards)."""
    r = trajectory.reward if reward is None else reward
    targets = jax.vmap(n_step_targets, in_axes=(1, 1, 1, None, None), out_axes=1)
    ret, weight, last = targets(r.astype(jnp.float32), trajectory.discount.astype(jnp.float32),
                                trajectory.episode_end, n, gamma)
    columns = jnp.arange(r.shape[1])[None, :]
    bootstrap = jax.tree.map(lambda x: x[last, columns], trajectory.next_observation)
    out = Transition(trajectory.observation, trajectory.action, ret, weight, bootstrap)
    size = r.size
    return jax.tree.map(lambda x: x.reshape((size,) + x.shape[2:]), out)


# ---------------------------------------------------------------- another learner-shard count (host side)


def redistribute(buffers: ReplayBuffer, count: int) -> tuple[ReplayBuffer, dict[str, int]]:
    """`Agent.reshard_state` of item buffers (n-step transitions: any order serves): the ring buffers
    of D learner shards (host arrays, data leaves `[D, capacity, ...]`, position and size `[D]`)
    dealt onto `count` buffers of the same capacity.

    Rule: when the D buffers' items fit in `count * capacity` they are all kept; else each old
    buffer keeps its newest items, the room shared out evenly (`fair_shares`; the oldest go, as a
    ring buffer's would).
    Old buffer i deals its kept items, oldest first, round-robin onto the new buffers starting at
    buffer `i mod count`, so every new buffer gets an even share of every old buffer's items and
    time span; each new buffer holds its items oldest first from slot 0 (a share that would
    overflow a buffer keeps its newest `capacity`). Returns the new buffers and
    `{"kept": items, "dropped": items}`.
    """
    size, position = np.asarray(buffers.size, np.int64), np.asarray(buffers.position, np.int64)
    capacity = jax.tree.leaves(buffers.data)[0].shape[1]
    keep = fair_shares(size, count * capacity)
    rank = np.concatenate([np.arange(k) for k in keep] + [np.zeros(0, np.int64)])  # 0 = oldest kept
    source = np.repeat(np.arange(size.shape[0]), keep)
    source_slot = (np.repeat(position - keep, keep) + rank) % capacity
    target = (rank + source) % count
    order = np.argsort((rank + 0.5) / np.repeat(np.maximum(keep, 1), keep), kind="stable")  # oldest first
    source, source_slot, target = source[order], source_slot[order], target[order]
    slot = np.zeros_like(target)
    for shard in range(count):
        mine = np.flatnonzero(target == shard)
        slot[mine] = np.arange(mine.size) - max(0, mine.size - capacity)  # an overflowing share keeps its newest
    fits = slot >= 0

    def deal(x: np.ndarray) -> np.ndarray:
        out = np.zeros((count,) + x.shape[1:], x.dtype)
        out[target[fits], slot[fits]] = x[source[fits], source_slot[fits]]
        return out

    new_size = np.bincount(target[fits], minlength=count).astype(np.asarray(buffers.size).dtype)
    moved = ReplayBuffer(jax.tree.map(deal, buffers.data), new_size % capacity, new_size)
    return moved, {"kept": int(fits.sum()), "dropped": int(size.sum() - fits.sum())}


def fair_shares(sizes: np.ndarray, room: int) -> np.ndarray:
    """How many of each `sizes[i]` items to keep in `room`: all when they fit, else max-min fair shares
    (smallest first, each takes at most an even split of the room left), so no room stays unused."""
    keep = np.asarray(sizes, np.int64).copy()
    if keep.sum() <= room:
        return keep
    left, shards = room, keep.size
    for i in np.argsort(keep, kind="stable"):
        keep[i] = min(keep[i], left // shards)
        left, shards = left - keep[i], shards - 1
    return keep


def refill(buffers: ReplayBuffer, count: int) -> tuple[ReplayBuffer, dict[str, int]]:
    """`Agent.reshard_state` of sequence buffers (MuZero's windows: each env's steps sit at a stride
    set by the shard's env count, which another shard count changes): `count` empty buffers of the
    same capacity, which training refills; returns them and `{"kept": 0, "dropped": items}`."""
    size = np.asarray(buffers.size)
    empty = ReplayBuffer(jax.tree.map(lambda x: np.zeros((count,) + x.shape[1:], x.dtype), buffers.data),
                         np.zeros((count,), size.dtype), np.zeros((count,), size.dtype))
    return empty, {"kept": 0, "dropped": int(size.sum())}
