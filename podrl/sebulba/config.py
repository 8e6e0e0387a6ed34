"""The frozen, validated Sebulba run config (one-line doc per field for tyro)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
from typing import Any, ClassVar

from podrl.core.errors import ConfigError, is_int, require_choice, require_int, require_number
from podrl.core.types import AgentConfig
from podrl.envs.schemes import check_host_options
from podrl.run.config import RunConfig
from podrl.run.options import MAY_CHANGE, option


@dataclasses.dataclass(frozen=True)
class SebulbaConfig(RunConfig):
    """Sebulba: actor threads step host envs and infer on actor devices; learner devices update."""

    layout: ClassVar[str] = "sebulba"
    """The layout name runs and checkpoints record."""
    eval_every: int = 0
    """Evaluate the greedy policy every this many updates (after the log record that reaches or passes each multiple)
    and at the end; 0 = only at the end."""
    eval_episodes: int = 16
    """Greedy episodes per evaluation (on a separate host env batch); 0 disables evaluation."""
    eval_max_steps: int = 10_000
    """Step bound of one evaluation episode."""
    actor_devices: tuple[int, ...] = (0,)
    """Indices (into the local devices) of the devices that run policy inference."""
    learner_devices: tuple[int, ...] | None = option(None, on_resume=MAY_CHANGE)
    """Indices of the learner devices; None = every local device not acting (the actor device if it is the only one).
    May change on resume."""
    threads_per_actor_device: int = 1
    """Actor threads per actor device, each with its own envs, queue and PRNG key."""
    envs_per_thread: int = 8
    """Environments stepped together by one actor thread."""
    env_groups: int = 1
    """Env batches per actor thread that alternate (one steps while the other's inference runs); 1 keeps Anakin's exact
    per-step sampling."""
    actor_cpus: tuple[int, ...] = option((), on_resume=MAY_CHANGE)
    """Opt-in pinning (Linux): actor thread j runs on CPU core actor_cpus[j % len]; () pins nothing (env worker threads:
    env_kwargs thread_affinity_offset)."""
    rollout_length: int = 64
    """Steps per environment in one rollout (one rollout per thread per update)."""
    lag: str = "0"
    """Staleness: '0' synchronous, 'N' fixed N-version policy lag (Cleanba uses 1), 'async' latest params."""
    queue_size: int = 1
    """Rollouts each actor thread may have waiting for the learner (bounds async lag to queue_size + 1)."""
    env_kwargs: tuple[str, ...] = option((), box="env")
    """Host env options as key=value, e.g. protocol=dqn full_action_space=True (ale:/envpool: Atari: protocol
    machado|dqn, full_action_space, repeat_action_probability, max_episode_frames, num_threads); other envs get them as
    constructor keyword arguments."""
    vectorization: str = option("sync", box="env")
    """How gymnasium envs of one thread are vectorised: 'sync' (in the thread) or 'async' (worker processes, spawn)."""
    timeout_s: float = option(60.0, on_resume=MAY_CHANGE)
    """Any blocking wait (queue, params, env step observed by the learner) longer than this stops the run."""
    log_every: int = option(10, on_resume=MAY_CHANGE)
    """Log metrics every this many updates."""

    def __post_init__(self):
        require_int(self, "threads_per_actor_device", "envs_per_thread", "env_groups", "rollout_length", "queue_size",
                    "log_every")
        if self.envs_per_thread % self.env_groups:
            raise ConfigError("env_groups", f"{self.envs_per_thread} envs of a thread cannot be split into "
                                            f"{self.env_groups} equal groups (envs_per_thread must be a multiple)")
        require_number(self, "timeout_s", low=0.0, low_open=True)
        _check_indices("actor_devices", self.actor_devices, allow_empty=False)
        if self.learner_devices is not None:
            _check_indices("learner_devices", self.learner_devices, allow_empty=False)
        if self.actor_cpus:
            _check_indices("actor_cpus", self.actor_cpus, allow_empty=False)
        if self.lag != "async" and not (self.lag.isdigit() and int(self.lag) >= 0):
            raise ConfigError("lag", f"must be a non-negative integer ('0', '1', ...) or 'async', got {self.lag!r}")
        require_choice(self, "vectorization", ("sync", "async"))
        super().__post_init__()
        check_host_options(self.env, self.env_options)  # the key=value syntax, and ale's Atari options

    @functools.cached_property
    def env_options(self) -> dict[str, Any]:
        """`env_kwargs` as keyword arguments of the host env factory (`parse_env_kwargs`), parsed once."""
        return parse_env_kwargs(self.env_kwargs)

    @property
    def num_threads(self) -> int:
        return len(self.actor_devices) * self.threads_per_actor_device

    @property
    def envs_per_group(self) -> int:
        """Envs of one env group (one `HostVectorEnv`)."""
        return self.envs_per_thread // self.env_groups

    @property
    def steps_per_update(self) -> int:
        """Env steps consumed by one update: one rollout from every actor thread."""
        return self.num_threads * self.envs_per_thread * self.rollout_length

    def logged_steps(self, updates: int, num_processes: int) -> int:
        """The env-step count logged after `updates` updates: every process's actors feed each update."""
        return updates * self.steps_per_update * num_processes

    @functools.cached_property
    def fixed_lag(self) -> int | None:
        """The fixed policy lag, or None in async mode."""
        return None if self.lag == "async" else int(self.lag)

    def resolve_learner_devices(self, num_local: int) -> tuple[int, ...]:
        """Learner device indices after defaults; checks the split against the local devices."""
        for name, indices in (("actor_devices", self.actor_devices), ("learner_devices", self.learner_devices or ())):
            bad = [i for i in indices if i >= num_local]
            if bad:
                raise ConfigError(name, f"device index {bad[0]} does not exist: this process has {num_local} "
                                        f"local device(s) (on CPU: XLA_FLAGS=--xla_force_host_platform_device_count=N)")
        if self.learner_devices is not None:
            learners = self.learner_devices
        else:
            learners = tuple(i for i in range(num_local) if i not in self.actor_devices) or self.actor_devices
        shared = set(learners) & set(self.actor_devices)
        if shared and num_local > 1:
            raise ConfigError("learner_devices", f"device(s) {sorted(shared)} both act and learn; with "
                              f"{num_local} local devices keep actors and learners disjoint")
        return learners

    def check_layout(self, num_local: int, agent_config: AgentConfig) -> tuple[int, ...]:
        """All checks that need the device count, before anything compiles; returns learner indices."""
        learners = self.resolve_learner_devices(num_local)
        if self.envs_per_thread % len(learners):
            raise ConfigError("envs_per_thread", f"{self.envs_per_thread} envs of a thread cannot be split evenly "
                                                 f"over {len(learners)} learner devices")
        agent_config.check_batch(self.rollout_length, self.num_threads * self.envs_per_thread // len(learners))
        return learners


def _check_indices(name: str, value: object, allow_empty: bool) -> None:
    ok = isinstance(value, (tuple, list)) and all(is_int(i) and i >= 0 for i in value)
    ok = ok and (allow_empty or len(value) > 0) and len(set(value)) == len(value)
    if not ok:
        what = "CPU core" if name == "actor_cpus" else "device"
        raise ConfigError(name, f"must be a non-empty tuple of distinct {what} indices >= 0, got {value!r}")


def check_actor_cpus(cpus: tuple[int, ...]) -> None:
    """ConfigError("actor_cpus") unless this process may run on every core of `cpus` (Linux only)."""
    if not cpus:
        return
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError("actor_cpus", "pinning actor threads needs os.sched_setaffinity (Linux); leave it ()")
    allowed = os.sched_getaffinity(0)
    missing = sorted(set(cpus) - allowed)
    if missing:
        raise ConfigError("actor_cpus", f"core(s) {missing} are not among this process's cores {sorted(allowed)}")


def parse_env_kwargs(items: tuple[str, ...]) -> dict[str, Any]:
    """`("key=value", ...)` -> `{key: value}`; values are Python literals (True, 3, 0.25, 'x') or
    else kept as strings (`protocol=dqn`). Raises ConfigError("env_kwargs") on a malformed or
    repeated key."""
    if not isinstance(items, (tuple, list)):
        raise ConfigError("env_kwargs", f"must be a tuple of 'key=value' strings, got {items!r}")
    options: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=") if isinstance(item, str) else ("", "", "")
        if not sep or not key.isidentifier():
            raise ConfigError("env_kwargs", f"expected 'key=value' with a Python identifier as key, got {item!r}")
        if key in options:
            raise ConfigError("env_kwargs", f"{key!r} is given twice")
        try:
            options[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            options[key] = text
    return options
