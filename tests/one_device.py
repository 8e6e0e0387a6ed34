"""`Agent.update` run as a layout runs it, on one device: jitted, inside `jax.shard_map` over a
one-device data mesh (an update's `pmean`s over the learner axis need the axis to exist), its
metrics averaged by the layout's `learner_metrics` (`podrl.testing.layout_update`)."""

from __future__ import annotations

from typing import Callable

import jax

from podrl.core.types import Agent
from podrl.testing import layout_update, of_shard, on_shards


def update_on_one_device(agent: Agent) -> Callable:
    """`update(train_state, trajectory [T, B], key) -> (train_state, metrics)` of `agent`, one learner shard;
    the train state as `agent.init` returns it."""
    update = layout_update(agent, jax.devices()[:1])

    def one(train_state, trajectory, key):
        train_state, metrics = update(on_shards(train_state, 1), trajectory, key)
        return of_shard(train_state), metrics

    return one


def sharded_update_on_one_device(agent: Agent) -> Callable:
    """`update` as `update_on_one_device`, with `shard_state` laid out as the layouts keep it: leaves
    `[1, ...]` over the data axis (a prioritised replay's priorities vary over the learners). Takes and
    returns the train state in that layout (`podrl.core.learner_state.shard_global` of `agent.init`'s)."""
    return layout_update(agent, jax.devices()[:1])
