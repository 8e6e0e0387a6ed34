"""`Agent.update` run as a layout runs it, on one device: jitted, inside `jax.shard_map` over a
one-device data mesh (an update's `pmean`s over the learner axis need the axis to exist)."""

from __future__ import annotations

from typing import Callable

import jax
from jax.sharding import PartitionSpec as P

from podrl.core.learner_state import shard_global, shard_local, train_state_spec
from podrl.core.mesh import data_mesh
from podrl.core.types import Agent


def update_on_one_device(agent: Agent) -> Callable:
    """`update(train_state, trajectory [T, B], key) -> (train_state, metrics)` of `agent`, one learner shard."""
    return jax.jit(jax.shard_map(agent.update, mesh=data_mesh(jax.devices()[:1]), in_specs=(P(), P(), P()),
                                 out_specs=(P(), P())))


def sharded_update_on_one_device(agent: Agent) -> Callable:
    """`update` as `update_on_one_device`, with `shard_state` laid out as the layouts keep it: leaves
    `[1, ...]` over the data axis (a prioritised replay's priorities vary over the learners). Takes and
    returns the train state in that layout (`podrl.core.learner_state.shard_global` of `agent.init`'s)."""

    def update(train_state, traj, key):
        train_state, metrics = agent.update(shard_local(train_state), traj, key)
        return shard_global(train_state), metrics

    spec = train_state_spec()
    return jax.jit(jax.shard_map(update, mesh=data_mesh(jax.devices()[:1]), in_specs=(spec, P(), P()),
                                 out_specs=(spec, P())))
