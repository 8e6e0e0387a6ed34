"""The Sebulba learner step: `jax.jit(jax.shard_map(agent.update))` over the learner mesh.

It calls the very same `Agent.update` as Anakin. The rollouts of all actor
threads arrive already split along the batch axis over the learner devices; each
shard concatenates its local pieces (no cross-device traffic) and updates on
them, gradients averaged by the agent through `podrl.core.parallel`, the metrics it returns
by the learner step (`podrl.core.parallel.learner_metrics`, as in Anakin). The train state
lies on the mesh as `podrl.core.learner_state` says (the per-shard `shard_state`
sharded over the learners, the rest replicated).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from podrl.core.finite import count_nonfinite
from podrl.core.keys import update_keys
from podrl.core.learner_state import shard_global, shard_local, train_state_spec
from podrl.core.parallel import DATA_AXIS, learner_metrics, sum_across_learners
from podrl.core.types import Agent, TrainState, Trajectory
from podrl.sebulba.transport import TRAJECTORY_SPEC


def concat_batches(pieces: list[Trajectory]) -> Trajectory:
    """Joins `[T, B_i]` trajectories along the batch axis (actor state along its axis 0)."""
    if len(pieces) == 1:
        return pieces[0]
    steps = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1), *[p._replace(actor_state=()) for p in pieces])
    actor_state = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *[p.actor_state for p in pieces])
    return steps._replace(actor_state=actor_state)


class LearnerStep:
    """`step(train_state, shard_keys [D], index, *pieces) -> (train_state, metrics)`, jitted.

    `shard_keys[d]` is learner shard d's base key; update `index` uses the update
    half of `update_keys(shard_keys[d], index)` (as Anakin's shard d does). The
    train state's `shard_state` (a replay buffer may fill most of a learner device)
    is donated, so the update rewrites it in place instead of holding two copies;
    the rest is not (its params may be what actors on the same device act with).
    """

    def __init__(self, jitted: Callable):
        self.jitted = jitted

    def __call__(self, train_state: TrainState, shard_keys, index, *pieces):
        train_state, metrics, _ = self.checked(train_state, shard_keys, index, *pieces)
        return train_state, metrics

    def checked(self, train_state: TrainState, shard_keys, index, *pieces):
        """`(train_state, metrics, inputs)`: `inputs` (`podrl.core.finite.InputCounts` of `[num_pieces]` arrays) counts
        each piece's NaN/Inf rewards and observations, over all its learner shards."""
        rest, shard_state, metrics, inputs = self.jitted(train_state._replace(shard_state=()),
                                                         train_state.shard_state, shard_keys, index, *pieces)
        return rest._replace(shard_state=shard_state), metrics, inputs

    def compile(self, train_state: TrainState, shard_keys, index, *pieces) -> "LearnerStep":
        """The same step compiled ahead of time for these arguments' shapes and shardings."""
        lowered = self.jitted.lower(train_state._replace(shard_state=()), train_state.shard_state, shard_keys,
                                    index, *pieces)
        return LearnerStep(lowered.compile())


def make_learner_step(agent: Agent, mesh: Mesh, num_pieces: int) -> LearnerStep:
    """The learner step of `agent` over `mesh` for `num_pieces` actor rollouts (see `LearnerStep`)."""

    def shard_step(rest, shard_state, shard_keys, index, *pieces):
        _, update_key = update_keys(shard_keys[0], index)
        train_state = shard_local(rest._replace(shard_state=shard_state))
        train_state, metrics = agent.update(train_state, concat_batches(list(pieces)), update_key)
        metrics = learner_metrics(metrics)  # the layout averages what the agent's shard reports
        train_state = shard_global(train_state)
        counts = [count_nonfinite(p.reward, p.observation, index, reduce=sum_across_learners) for p in pieces]
        inputs = jax.tree.map(lambda *xs: jnp.stack(xs), *counts)
        return train_state._replace(shard_state=()), train_state.shard_state, metrics, inputs

    spec = train_state_spec()
    in_specs = (spec._replace(shard_state=()), spec.shard_state, P(DATA_AXIS), P()) + (TRAJECTORY_SPEC,) * num_pieces
    out_specs = (spec._replace(shard_state=()), spec.shard_state, P(), P())
    mapped = jax.shard_map(shard_step, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    return LearnerStep(jax.jit(mapped, donate_argnums=(1,)))
