"""The Sebulba learner step: `jax.jit(jax.shard_map(agent.update))` over the learner mesh.

It calls the very same `Agent.update` as Anakin. The rollouts of all actor
threads arrive already split along the batch axis over the learner devices; each
shard concatenates its local pieces (no cross-device traffic) and updates on
them, gradients averaged by the agent through `podrl.parallel`. The train state
lies on the mesh as `podrl.learner_state` says (the per-shard `shard_state`
sharded over the learners, the rest replicated).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from podrl.learner_state import shard_global, shard_local, train_state_spec
from podrl.parallel import DATA_AXIS
from podrl.keys import update_keys
from podrl.sebulba.transport import TRAJECTORY_SPEC
from podrl.types import Agent, Trajectory

def concat_batches(pieces: list[Trajectory]) -> Trajectory:
    """Joins `[T, B_i]` trajectories along the batch axis (actor state along its axis 0)."""
    if len(pieces) == 1:
        return pieces[0]
    steps = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1), *[p._replace(actor_state=()) for p in pieces])
    actor_state = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *[p.actor_state for p in pieces])
    return steps._replace(actor_state=actor_state)


def make_learner_step(agent: Agent, mesh: Mesh, num_pieces: int) -> Callable:
    """`step(train_state, shard_keys [D], index, *pieces) -> (train_state, metrics)`, jitted.

    `shard_keys[d]` is learner shard d's base key; update `index` uses the update
    half of `update_keys(shard_keys[d], index)` (as Anakin's shard d does).
    """

    def shard_step(train_state, shard_keys, index, *pieces):
        _, update_key = update_keys(shard_keys[0], index)
        train_state, metrics = agent.update(shard_local(train_state), concat_batches(list(pieces)), update_key)
        return shard_global(train_state), metrics

    in_specs = (train_state_spec(), P(DATA_AXIS), P()) + (TRAJECTORY_SPEC,) * num_pieces
    mapped = jax.shard_map(shard_step, mesh=mesh, in_specs=in_specs, out_specs=(train_state_spec(), P()))
    return jax.jit(mapped)
