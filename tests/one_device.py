"""`Agent.update` run as a layout runs it, on one device: jitted, inside `jax.shard_map` over a
one-device data mesh (an update's `pmean`s over the learner axis need the axis to exist)."""

from __future__ import annotations

from typing import Callable

import jax
from jax.sharding import PartitionSpec as P

from podrl.core.mesh import data_mesh
from podrl.core.types import Agent


def update_on_one_device(agent: Agent) -> Callable:
    """`update(train_state, trajectory [T, B], key) -> (train_state, metrics)` of `agent`, one learner shard."""
    return jax.jit(jax.shard_map(agent.update, mesh=data_mesh(jax.devices()[:1]), in_specs=(P(), P(), P()),
                                 out_specs=(P(), P())))
