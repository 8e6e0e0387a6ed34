"""Device meshes and shardings for the data-parallel layouts."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from podrl.core.compat import check_jax
from podrl.core.errors import ConfigError
from podrl.core.parallel import DATA_AXIS, POPULATION_AXIS


def local_devices(num_devices: int | None = None, field: str = "num_devices") -> list[jax.Device]:
    """The first `num_devices` local devices (all when None), checked against what exists."""
    devices = jax.local_devices()
    if num_devices is None:
        return devices
    if num_devices > len(devices):
        raise ConfigError(
            field,
            f"asked for {num_devices} devices but this process has {len(devices)} "
            f"({devices[0].platform}); on CPU set XLA_FLAGS=--xla_force_host_platform_device_count=N",
        )
    return devices[:num_devices]


def mesh_devices(num_local: int | None = None, field: str = "num_devices") -> list[jax.Device]:
    """The devices of the data-parallel mesh: the first `num_local` local devices of
    every process (all when None), ordered by process. One process: `local_devices`."""
    chosen = local_devices(num_local, field)
    if jax.process_count() == 1:
        return chosen
    count = len(chosen)
    return [d for p in range(jax.process_count()) for d in jax.local_devices(process_index=p)[:count]]


def data_mesh(devices: Sequence[jax.Device]) -> Mesh:
    """A 1-D mesh over `devices` with the learner axis `DATA_AXIS` (Auto axis type)."""
    if len(devices) > 1:
        check_jax()  # a jaxlib podrl excludes fails on programs over 2+ devices (podrl.core.compat)
    return Mesh(np.asarray(devices), (DATA_AXIS,), axis_types=(AxisType.Auto,))


def population_mesh(devices: Sequence[jax.Device], population_shards: int = 1) -> Mesh:
    """A 2-D mesh `(POPULATION_AXIS, DATA_AXIS)` of shape `(population_shards, len(devices) //
    population_shards)` (Auto axis types): row r holds members `r * S/P ..` of the population,
    its columns are their data-parallel shards. `devices` come ordered by process
    (`mesh_devices`), so with more than one process the rows span processes."""
    if len(devices) > 1:
        check_jax()
    grid = np.asarray(devices).reshape(population_shards, len(devices) // population_shards)
    return Mesh(grid, (POPULATION_AXIS, DATA_AXIS), axis_types=(AxisType.Auto, AxisType.Auto))


def replicated(mesh: Mesh) -> NamedSharding:
    """Every device holds the whole array."""
    return NamedSharding(mesh, P())


def local_replica(tree):
    """This process's copy of a replicated global pytree: each leaf's first local shard.

    Needs no collective, so one process may call it alone (process 0 evaluating);
    `jax.device_put(tree, device)` would refuse a tree that spans other processes.
    """
    return jax.tree.map(lambda x: x.addressable_data(0), tree)
