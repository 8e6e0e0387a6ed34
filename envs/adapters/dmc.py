"""dm_control suite tasks as host envs: `make_host_env("dmc:cartpole-swingup", num_envs)`.

`dmc:<domain>-<task>` loads `dm_control.suite.load(domain, task)` (the `dmc` extra) and runs it
through the dm_env adapter (`podrl.envs.adapters.dm_env.DmEnvVectorEnv`), so the time limit and
termination follow dm_env's convention there: the suite's time limit ends an episode with a
LAST step of discount 1, which the adapter reports as a truncation (bootstrapped); a task that
ends with discount 0 terminates.

* Observations: a suite task observes an OrderedDict of arrays (`position`, `velocity`, ...);
  `FlatObservation` concatenates them, each flattened (a scalar becomes one entry), in the
  order of the task's `observation_spec()` (fixed per task), into one float `[D]` vector.
* Actions: the task's `BoundedArray` action spec (its minimum and maximum, e.g. [-1, 1] per
  actuator) is the env's action spec; SAC/TD3/PPO scale their actions to it.
* Seeding: env i of a batch is loaded with `task_kwargs={"random": seed + i}`.
* `--env-kwargs` go to `suite.load` as `task_kwargs` (e.g. `time_limit=10`).

An unknown domain or task is an `UnknownEnvError` (a ConfigError on `env`, raised before anything
compiles) listing the valid names.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import dm_env
import numpy as np
from dm_env import specs

from podrl.envs.adapters.dm_env import DmEnvVectorEnv
from podrl.envs.adapters.optional import import_optional
from podrl.envs.errors import UnknownEnvError

PREFIX = "dmc:"
"""Env names of this adapter: 'dmc:<domain>-<task>'."""


def _suite():
    return import_optional("dm_control.suite", "dm_control suite", "dmc", "dm_control")


def task_names() -> list[str]:
    """Every 'dmc:<domain>-<task>' the installed dm_control suite knows."""
    return [f"{PREFIX}{domain}-{task}" for domain, task in _suite().ALL_TASKS]


def parse_name(name: str) -> tuple[str, str]:
    """`(domain, task)` of 'dmc:<domain>-<task>'; UnknownEnvError listing the valid ones otherwise."""
    rest = name[len(PREFIX):] if name.startswith(PREFIX) else name
    domain, _, task = rest.partition("-")
    known: dict[str, list[str]] = {}
    for d, t in _suite().ALL_TASKS:
        known.setdefault(d, []).append(t)
    if domain not in known:
        raise UnknownEnvError(f"env {name!r}: unknown dm_control domain {domain!r}; expected 'dmc:<domain>-<task>' "
                              f"with a domain of {sorted(known)}")
    if task not in known[domain]:
        raise UnknownEnvError(f"env {name!r}: dm_control domain {domain!r} has no task {task!r}; its tasks: "
                              f"{sorted(known[domain])} (e.g. 'dmc:{domain}-{sorted(known[domain])[0]}')")
    return domain, task


class FlatObservation(dm_env.Environment):
    """A dm_env whose OrderedDict observation is concatenated into one float `[D]` vector.

    The keys keep the order of `env.observation_spec()`; `keys` and `sizes` record it.
    """

    def __init__(self, env: dm_env.Environment):
        self._env = env
        spec = env.observation_spec()
        if not isinstance(spec, Mapping):
            raise TypeError(f"FlatObservation expects a dict observation spec, got {type(spec).__name__}")
        self.keys = tuple(spec)
        self.sizes = tuple(int(np.prod(spec[k].shape)) for k in self.keys)
        dtype = np.result_type(*(spec[k].dtype for k in self.keys))
        self._spec = specs.Array((sum(self.sizes),), dtype, name="observation")

    def _flat(self, timestep: dm_env.TimeStep) -> dm_env.TimeStep:
        obs = timestep.observation
        flat = np.concatenate([np.asarray(obs[k], self._spec.dtype).reshape(-1) for k in self.keys])
        return timestep._replace(observation=flat)

    def reset(self) -> dm_env.TimeStep:
        return self._flat(self._env.reset())

    def step(self, action) -> dm_env.TimeStep:
        return self._flat(self._env.step(action))

    def observation_spec(self) -> specs.Array:
        return self._spec

    def action_spec(self):
        return self._env.action_spec()

    def close(self) -> None:
        self._env.close()


def load(domain: str, task: str, seed: int = 0, **task_kwargs: Any) -> FlatObservation:
    """One suite task, seeded, with a flat observation (`task_kwargs` go to the task, e.g. time_limit)."""
    env = _suite().load(domain, task, task_kwargs={**task_kwargs, "random": seed})
    return FlatObservation(env)


def make_dmc_env(name: str, num_envs: int, seed: int = 0, **task_kwargs: Any) -> DmEnvVectorEnv:
    """`num_envs` copies of the task 'dmc:<domain>-<task>' as a `HostVectorEnv` (module docstring)."""
    domain, task = parse_name(name)
    return DmEnvVectorEnv(functools.partial(load, domain, task, **task_kwargs), num_envs, seed=seed)
