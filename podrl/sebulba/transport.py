"""How a Sebulba trajectory travels from an actor thread to the learner devices.

One spec says where every field lives on the learner mesh; everything else is
derived from it: the `NamedSharding`s an actor places its rollout with, the
shard_map `in_specs` of the learner step, and the example trajectory the learner
step is compiled with.

Layout of one actor thread's rollout (T steps, B envs; B split over the `D`
learner devices of every process, `B / D` rows each):

  observation, next_observation  `[T, B, *obs]`   spec P(None, DATA_AXIS)   (each leaf of a nested one)
  action                         `[T, B, *act]`   spec P(None, DATA_AXIS)
  reward, discount               `[T, B]` float32 spec P(None, DATA_AXIS)
  truncated                      `[T, B]` bool    spec P(None, DATA_AXIS)
  agent_extras (pytree)          `[T, B, ...]`    spec P(None, DATA_AXIS)
  actor_state (pytree or ())     `[B, ...]`       spec P(DATA_AXIS)   (carry before step 0)

An actor thread writes its rollout step by step into a `RolloutBuffer`: numpy `[T, B]`
leaves allocated 64-byte aligned (`aligned_empty`), because XLA:CPU takes such an array
without copying it (measured on this project's 2-core CPU: a 14 MB block of Atari
observations reaches a CPU device in 0.1 ms aligned, 14-76 ms unaligned), so on CPU the
rollout reaches the learner device, and each step's observations the actor device,
without a copy. A buffer goes back to its actor thread once the update that consumed it has
finished (`ActorPool.recycle`), so steady-state rollouts neither allocate nor page-fault
(a fresh 29 MB Atari rollout costs thousands of first-touch page faults).
`stack_rollout` turns `T` one-step records (a `Trajectory` without the time axis and with
`actor_state=()`) into the same `[T, B]` record (example trajectories, benchmarks).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding

from podrl.core.learner_state import TRAJECTORY_SPEC
from podrl.core.types import Trajectory

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


ALIGNMENT = 64
"""Byte alignment of rollout buffers (XLA:CPU's zero-copy condition for host arrays)."""


def aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised numpy array whose data starts on an `ALIGNMENT`-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


def _put(target: np.ndarray, value: Any, field: str, cast: bool) -> None:
    """`target[...] = value`, refusing another shape (and, unless `cast`, another dtype) with the field's name."""
    value = np.asarray(value)
    if value.shape != target.shape or not (cast or value.dtype == target.dtype):
        raise ValueError(f"rollout field {field}: expected {target.dtype} {list(target.shape)}, "
                         f"got {value.dtype} {list(value.shape)} (the env or the agent changed it mid-run)")
    target[...] = value


def _put_tree(buffers: Any, t: int, rows: slice, value: Any, field: str) -> None:
    """`_put` of each leaf of an observation into its buffer's step `t`, `rows` (same structure required)."""
    if jax.tree.structure(value) != jax.tree.structure(buffers):
        raise ValueError(f"rollout field {field}: expected the structure {jax.tree.structure(buffers)}, got "
                         f"{jax.tree.structure(value)} (the env changed it mid-run)")
    jax.tree.map(lambda buf, x: _put(buf[t, rows], x, field, cast=False), buffers, value)


class RolloutBuffer:
    """One actor thread's rollout `[T, B]` as aligned numpy leaves shaped like `example` (module docstring).

    Step `t` of the env rows `rows` (a slice of B) is written in two parts: `write_acted` (what the
    actor saw and did: observation, action, agent extras) and `write_result` (what the env
    returned: reward, discount, truncated, next observation). reward, discount and truncated are
    cast to `FIELD_DTYPES`; every other field must keep its dtype and shape.
    """

    def __init__(self, example: "Trajectory"):
        self.steps = jax.tree.map(lambda x: aligned_empty(x.shape, x.dtype), example._replace(actor_state=()))

    def observation(self, t: int, rows: slice) -> Any:
        """The observation written for step `t` of `rows` (views: aligned when the row size is)."""
        return jax.tree.map(lambda buf: buf[t, rows], self.steps.observation)

    def write_observation(self, t: int, rows: slice, observation: Any) -> None:
        _put_tree(self.steps.observation, t, rows, observation, "observation")

    def write_acted(self, t: int, rows: slice, action: Any, extras: Any) -> None:
        _put(self.steps.action[t, rows], action, "action", cast=False)
        jax.tree.map(lambda buf, x: _put(buf[t, rows], x, "agent_extras", cast=False), self.steps.agent_extras, extras)

    def write_result(self, t: int, rows: slice, reward: Any, discount: Any, truncated: Any, next_obs: Any) -> None:
        steps = self.steps
        _put(steps.reward[t, rows], reward, "reward", cast=True)
        _put(steps.discount[t, rows], discount, "discount", cast=True)
        _put(steps.truncated[t, rows], truncated, "truncated", cast=True)
        _put_tree(steps.next_observation, t, rows, next_obs, "next_observation")

    def trajectory(self, actor_state: Any) -> "Trajectory":
        """The written rollout starting from `actor_state` `[B, ...]` (numpy)."""
        return self.steps._replace(actor_state=actor_state)


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
