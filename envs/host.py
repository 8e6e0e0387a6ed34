"""The host vector-env contract: a batch of environments stepped on the host CPU (Sebulba).

A `HostVectorEnv` has the same semantics as a JAX env wrapped by
`podrl.envs.wrap_for_training`, only with numpy arrays and a leading batch axis `[B]`:

* `reset(seed)` returns a FIRST `TimeStep` for every env.
* `step(actions)` steps every env; an env whose episode ends is reset *in the
  same call*: its timestep is LAST (reward, discount, extras of the final step)
  but its `observation` is already the first observation of the next episode.
* `extras` always holds, each `[B]`-leading:
    "next_obs"        the observation the action led to, before any reset
                      (bootstraps truncated episodes);
    "truncated"       bool, the episode was cut (time limit), discount stays 1;
    "episode_return"  float32, running return (the episode's total on LAST);
    "episode_length"  int32, running length (the episode's total on LAST).
* discount is 0 where the episode terminated, and, with episodic life (Atari's
  "dqn" protocol), at a MID step where a life was lost: the learning episode
  ends there (`Trajectory.episode_end`) while the game and its running
  `episode_return` / `episode_length` go on to the game's LAST step.
* `observation_spec()` / `action_spec()` describe ONE env (dm_env specs).

Optionally, a `HostVectorEnv` may split `step` in two: `step_async(actions)` starts the
step and returns at once, `step_wait()` returns its timestep; the pair must do exactly
what `step(actions)` does. The Sebulba actors use the pair when an env has it
(`GymnasiumVectorEnv` does: ale-py's AtariVectorEnv and envpool step in their own C++
threads, gymnasium's AsyncVectorEnv in its worker processes), so the actor thread can run
inference and bookkeeping while the envs step; any other env is stepped by `step`.

Adapters (gymnasium, dm_env, a JAX env on the host CPU) live in `envs/adapters/`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from podrl.envs.types import ActionSpec, ObservationSpec, TimeStep

EXTRAS_KEYS = ("next_obs", "truncated", "episode_return", "episode_length")
"""Keys every HostVectorEnv timestep carries in `extras`."""


@runtime_checkable
class HostVectorEnv(Protocol):
    """A batch of `num_envs` host environments; numpy in, numpy out (see module doc)."""

    num_envs: int

    def reset(self, seed: int) -> TimeStep: ...

    def step(self, actions: np.ndarray) -> TimeStep: ...

    def observation_spec(self) -> ObservationSpec: ...

    def action_spec(self) -> ActionSpec: ...

    def close(self) -> None: ...
