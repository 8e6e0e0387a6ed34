"""How a Sebulba trajectory travels from an actor thread to the learner devices.

One spec says where every field lives on the learner mesh; everything else is
derived from it: the `NamedSharding`s an actor places its rollout with, the
shard_map `in_specs` of the learner step, and the example trajectory the learner
step is compiled with.

Layout of one actor thread's rollout (T steps, B envs; B split over the `D`
learner devices of every process, `B / D` rows each):

  observation, next_observation  `[T, B, *obs]`   spec P(None, DATA_AXIS)
  action                         `[T, B, *act]`   spec P(None, DATA_AXIS)
  reward, discount               `[T, B]` float32 spec P(None, DATA_AXIS)
  truncated                      `[T, B]` bool    spec P(None, DATA_AXIS)
  agent_extras (pytree)          `[T, B, ...]`    spec P(None, DATA_AXIS)
  actor_state (pytree or ())     `[B, ...]`       spec P(DATA_AXIS)   (carry before step 0)

An actor records one step as a `Trajectory` without the time axis and with
`actor_state=()`; `stack_rollout` turns `T` such steps into the `[T, B]` record.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from podrl.core.parallel import DATA_AXIS
from podrl.core.types import Trajectory

TIME_MAJOR = P(None, DATA_AXIS)

TRAJECTORY_SPEC = Trajectory(
    observation=TIME_MAJOR, action=TIME_MAJOR, reward=TIME_MAJOR, discount=TIME_MAJOR, truncated=TIME_MAJOR,
    next_observation=TIME_MAJOR, agent_extras=TIME_MAJOR, actor_state=P(DATA_AXIS),
)
"""Where each field lives on the learner mesh (a prefix spec: one entry per field, pytrees included)."""

FIELD_DTYPES = {"reward": np.float32, "discount": np.float32, "truncated": np.bool_}
"""Fields cast on stacking, whatever the env returned (float64 rewards, 0/1 truncation flags)."""


def step_record(observation: Any, action: Any, reward: Any, discount: Any, truncated: Any,
                next_observation: Any, agent_extras: Any) -> Trajectory:
    """One step of an actor thread (numpy `[B, ...]` leaves), as a Trajectory without the time axis."""
    return Trajectory(observation, action, reward, discount, truncated, next_observation, agent_extras, ())


def stack_rollout(steps: list[Trajectory], actor_state: Any) -> Trajectory:
    """`T` step records -> a time-major numpy Trajectory `[T, B, ...]` starting from `actor_state` `[B, ...]`."""
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *steps)
    stacked = stacked._replace(**{name: getattr(stacked, name).astype(dtype) for name, dtype in FIELD_DTYPES.items()})
    return stacked._replace(actor_state=actor_state)


def example_trajectory(step: Trajectory, actor_state: Any, length: int) -> Trajectory:
    """Zeros shaped and typed like a `length`-step rollout whose steps look like `step`."""
    zero_step = jax.tree.map(np.zeros_like, step)
    return stack_rollout([zero_step] * length, jax.tree.map(np.zeros_like, actor_state))


def learner_shardings(mesh: Mesh, example: Trajectory) -> Trajectory:
    """`TRAJECTORY_SPEC` as one `NamedSharding` per leaf of `example` (its pytrees expanded)."""
    return Trajectory(*(jax.tree.map(lambda _, spec=spec: NamedSharding(mesh, spec), field)
                        for spec, field in zip(TRAJECTORY_SPEC, example)))


def place_on_learners(trajectory: Trajectory, shardings: Trajectory) -> Trajectory:
    """This process's numpy `[T, B]` rollout -> a global array split along B over the
    learner devices of every process (each process contributes its own rows)."""
    return jax.tree.map(lambda x, s: jax.make_array_from_process_local_data(s, np.asarray(x)),
                        trajectory, shardings)


def bytes_per_step(trajectory: Trajectory) -> dict[str, float]:
    """Bytes one env step adds to a `[T, B]` trajectory, per field, and their `total`.

    `trajectory`'s leaves need only `shape` and `dtype` (numpy arrays or
    `jax.ShapeDtypeStruct`s). `agent_extras` is summed over its leaves; the actor
    state (`[B, ...]`, once per rollout) is spread over the `T` steps.
    """
    t, b = trajectory.reward.shape[:2]

    def nbytes(tree) -> int:
        return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))

    sizes = {name: nbytes(getattr(trajectory, name)) / (t * b) for name in Trajectory._fields}
    sizes["total"] = sum(sizes.values())
    return sizes
