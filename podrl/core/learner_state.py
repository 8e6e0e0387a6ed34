"""How a `TrainState` lies on the learner mesh, shared by both layouts.

`params`, `opt_state` and `update_step` are replicated over the learner axis
`DATA_AXIS` (every shard holds the same values: gradients are averaged).
`shard_state` (e.g. a replay ring buffer) is per learner shard: each shard keeps
its own, never averaged. Globally every `shard_state` leaf has a shard axis of
size D (the learner devices), sharded over `DATA_AXIS`:

  Sebulba   params ... replicated P()        shard_state `[D, ...]`    P(DATA_AXIS)
  Anakin    params ... `[S, ...]` P(POP)     shard_state `[S, D, ...]` P(POP, DATA_AXIS)
            (S seeds or population members, split over the mesh's `POPULATION_AXIS` rows)

Inside the layout's shard_map a shard sees its leaves as `[1, ...]`; `shard_local`
drops that axis before `Agent.init`'s / `Agent.update`'s view (the agent sees its
shard's buffer with its own shapes, scalars such as a write pointer included) and
`shard_global` adds it back on the way out.

`check_shard_state_fits` refuses, before anything compiles or allocates, a
`shard_state` that does not fit a learner device's memory. Both layouts donate it
to their compiled update (Anakin its whole state, Sebulba the `shard_state`), so a
buffer is held once per device, not twice.

A `Placement` says how a layout's whole state lies on its mesh, for restoring a checkpoint onto
it, possibly one written on another number of learner shards: what is replicated (params,
optimizer state, counters, normalisation statistics, swept hyperparameters) is restored as saved;
what is per learner shard moves by a stated rule: `shard_state` by the agent's own
(`Agent.reshard_state`, `reshard_shard_state`), a shard's PRNG base key afresh from the key tree
and its new shard index (a pure function of both, `podrl.core.keys.base_key`).
"""

from __future__ import annotations

import os
from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from podrl.core.errors import ConfigError
from podrl.core.parallel import DATA_AXIS, POPULATION_AXIS
from podrl.core.types import Agent, TrainState, Trajectory

GIB = float(1 << 30)

TIME_MAJOR = P(None, DATA_AXIS)

TRAJECTORY_SPEC = Trajectory(
    observation=TIME_MAJOR, action=TIME_MAJOR, reward=TIME_MAJOR, discount=TIME_MAJOR, truncated=TIME_MAJOR,
    next_observation=TIME_MAJOR, agent_extras=TIME_MAJOR, actor_state=P(DATA_AXIS),
)
"""Where each field of a `[T, B]` trajectory lives on the learner mesh: split along the batch axis (a
prefix spec: one entry per field, pytrees included). Sebulba's learner and `podrl.testing` use it."""


def train_state_spec(seed_axis: bool = False) -> TrainState:
    """The shard_map spec (a prefix) of a global `TrainState`; `seed_axis`: leaves lead with `[S]`
    (Anakin), split over `POPULATION_AXIS` (a member's state lives on its device row)."""
    if not seed_axis:
        return TrainState(params=P(), opt_state=P(), update_step=P(), shard_state=P(DATA_AXIS), hyperparams=P())
    member = P(POPULATION_AXIS)
    return TrainState(params=member, opt_state=member, update_step=member,
                      shard_state=P(POPULATION_AXIS, DATA_AXIS), hyperparams=member)


NOT_PER_SHARD = -1
"""`Placement.shard_axes` of a part that is not per learner shard."""


class Placement(NamedTuple):
    """How a layout's training state lies on its mesh: what `podrl.run.checkpoint` restores onto."""

    mesh: Mesh
    specs: Any  # the state's PartitionSpec prefix tree (`train_state_spec`, Anakin's `STATE_SPECS`)
    shard_axes: Any  # a prefix tree like `specs`: per-learner-shard parts' shard axis, `NOT_PER_SHARD` elsewhere
    reshard: Callable[[Any, Any, int], tuple[Any, dict[str, int]]]
    """`(fresh, restored, saved_shards) -> (state, counts)`: the restored state, whose per-shard
    parts are host arrays of `saved_shards` learner shards, onto this mesh (module docstring)."""

    @property
    def learner_shards(self) -> int:
        return self.mesh.shape[DATA_AXIS]


def broadcast_prefix(prefix: Any, tree: Any) -> Any:
    """`prefix`'s leaves (PartitionSpecs, ints) repeated over the leaves of `tree`'s matching subtrees."""
    return jax.tree.map(lambda p, sub: jax.tree.map(lambda _: p, sub), prefix, tree,
                        is_leaf=lambda x: isinstance(x, (P, int)))


def train_state_shard_axes(seed_axis: bool = False) -> TrainState:
    """`Placement.shard_axes` of a global `TrainState` (see `train_state_spec`): `shard_state`'s shard
    axis (1 after Anakin's seed axis, else 0); the rest is not per shard."""
    return TrainState(params=NOT_PER_SHARD, opt_state=NOT_PER_SHARD, update_step=NOT_PER_SHARD,
                      shard_state=1 if seed_axis else 0, hyperparams=NOT_PER_SHARD)


def reshard_train_state(rule: Callable[[Any, int], tuple[Any, dict[str, int]]] | None, restored: TrainState,
                        fresh: TrainState, shard_axis: int) -> tuple[TrainState, dict[str, int]]:
    """`restored` (its `shard_state` as host arrays, leaves `[*lead, D_saved, ...]`, the shard axis at
    `shard_axis`) with that state moved onto the learner shards of `fresh` (a fresh global train
    state, `shard_state` leaves `[*lead, D, ...]`) by the agent's `rule` (`Agent.reshard_state`),
    once per leading index (Anakin: per seed); without a rule, `fresh`'s: every shard's state
    restarts. Returns it and the rule's counts summed over the leading indices (`{"restarted": 1}`
    without a rule)."""
    saved = restored.shard_state
    if not jax.tree.leaves(saved):
        return restored, {}
    if rule is None:
        return restored._replace(shard_state=fresh.shard_state), {"restarted": 1}
    count = jax.tree.leaves(fresh.shard_state)[0].shape[shard_axis]
    lead = jax.tree.leaves(saved)[0].shape[:shard_axis]
    parts, counts = [], {}
    for index in np.ndindex(*lead):
        part, part_counts = rule(jax.tree.map(lambda x: np.asarray(x[index]), saved), count)
        parts.append(part)
        counts = {k: counts.get(k, 0) + v for k, v in part_counts.items()}
    host = jax.tree.map(lambda *xs: np.stack(xs).reshape(lead + xs[0].shape), *parts)
    return restored._replace(shard_state=jax.tree.map(place_like, host, fresh.shard_state)), counts


def place_like(host: np.ndarray, like: jax.Array) -> jax.Array:
    """The global array of `host` (the whole array, on every process) laid out like `like`."""
    host = np.asarray(host, like.dtype)
    return jax.make_array_from_callback(like.shape, like.sharding, lambda index: host[index])


def shard_local(train_state: TrainState) -> TrainState:
    """Inside shard_map, one seed: shard_state leaves `[1, ...]` -> the agent's `[...]`."""
    return train_state._replace(shard_state=jax.tree.map(lambda x: x[0], train_state.shard_state))


def shard_global(train_state: TrainState) -> TrainState:
    """Inside shard_map, one seed: the agent's shard_state leaves `[...]` -> `[1, ...]`."""
    return train_state._replace(shard_state=jax.tree.map(lambda x: x[None], train_state.shard_state))


def init_on_mesh(agent: Agent, key: jax.Array, env_spec: Any, mesh: jax.sharding.Mesh) -> TrainState:
    """`agent.init(key, env_spec)` laid out on the learner `mesh` (Sebulba; Anakin inits inside its own
    shard_map): replicated, but for `shard_state`, `[D, ...]` over `DATA_AXIS`, each shard's its own.

    The key goes in as an argument (its raw data, a host array every process passes alike), not as a
    constant of the program: one compiled init serves every seed, and a warm compilation cache serves
    the next run's."""
    data, as_key = host_key_data(key)
    mapped = jax.shard_map(lambda data: shard_global(agent.init(as_key(data), env_spec)),
                           mesh=mesh, in_specs=P(), out_specs=train_state_spec())
    return jax.jit(mapped)(data)


def host_key_data(key: jax.Array) -> tuple[np.ndarray, Callable[[jax.Array], jax.Array]]:
    """`(data, as_key)`: the raw data of a typed PRNG key (uint32 `[2]` for threefry) as a host array,
    which a jitted program takes as an argument (a replicated one on every process of a multi-process
    mesh), and the function that makes it a key of `key`'s PRNG implementation again inside the program."""
    impl = jax.random.key_impl(key)
    return np.asarray(jax.random.key_data(key)), lambda data: jax.random.wrap_key_data(data, impl=impl)


def shard_state_bytes(agent: Agent, env_spec: Any) -> int:
    """Bytes of one shard's `shard_state` (one seed), from shapes alone (`jax.eval_shape`, no allocation)."""
    shapes = jax.eval_shape(agent.init, jax.random.key(0), env_spec)
    return int(sum(np.prod(x.shape, dtype=np.int64) * np.dtype(x.dtype).itemsize
                   for x in jax.tree.leaves(shapes.shard_state)))


def device_memory_bytes(device: jax.Device) -> int | None:
    """What `device` may allocate: its `bytes_limit` where the runtime says, else (CPU) the
    machine's physical memory divided by the local device count; None if unknown."""
    try:
        stats = device.memory_stats()
    except Exception:  # some backends raise instead of returning None
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return int(physical // max(1, jax.local_device_count()))


def check_shard_state_fits(agent: Agent, env_spec: Any, agent_config: Any, devices: Sequence[jax.Device],
                           copies: int = 1) -> int:
    """Raises ConfigError (naming the agent config's `memory_field`, else "agent") when `copies`
    shard states (Anakin: one per seed) do not fit the memory of the learner devices; returns
    the bytes one device needs."""
    need = copies * shard_state_bytes(agent, env_spec)
    if need == 0:
        return 0
    local = [d for d in devices if d.process_index == jax.process_index()] or list(devices)
    limits = [b for b in (device_memory_bytes(d) for d in local) if b is not None]
    if limits and need > min(limits):
        field = getattr(agent_config, "memory_field", None) or "agent"
        what = f" ({copies} seeds x {need // copies:,} bytes)" if copies > 1 else ""
        raise ConfigError(field, f"the per-learner-shard state (replay buffer) needs {need:,} bytes = "
                          f"{need / GIB:.2f} GiB per learner device{what}, but a {local[0].platform} device has "
                          f"{min(limits) / GIB:.2f} GiB; make {field} smaller")
    return need
