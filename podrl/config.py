"""Frozen, validated run configs. Every field carries a one-line doc (tyro shows it).

Field checks that need nothing but the config run in `__post_init__`, so a bad
value fails before JAX compiles anything; checks that need the device count run
in `check_layout` before the first trace. Errors are `ConfigError`s that start
with the field name.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import tyro

from envs.registry import UnknownEnvError, check_name
from podrl.errors import ConfigError, require_int, require_number
from podrl.types import AgentConfig


@dataclasses.dataclass(frozen=True)
class LoggingConfig:
    """Where and how a run reports."""

    run_dir: str | None = "runs"
    """Parent folder of the run directory (config.json, metrics.jsonl, TensorBoard); None writes no files."""
    run_name: str | None = None
    """Name of this run's folder under run_dir; default: '<env>__<agent>__seed<seed>__<time>'."""
    tensorboard: bool = True
    """Also write TensorBoard event files (needs tensorboardX, the 'tensorboard' extra)."""
    console: bool = True
    """Print a progress line after each compiled call."""


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    """When and where to checkpoint, and what to resume from."""

    every_updates: int = 0
    """Save every this many updates (0 = only on stop signals, faults and at the end)."""
    every_seconds: float = 0.0
    """Also save when this many seconds passed since the last save (0 = off)."""
    keep: int = 3
    """Keep the newest this many checkpoints."""
    directory: str | None = None
    """Where checkpoints go; None = the folder resumed from, else '<run dir>/checkpoints' (none without a run dir)."""
    resume: Annotated[str | None, tyro.conf.arg(aliases=("--resume",))] = None
    """Resume from this checkpoint directory (or run directory); the config must match but for safe fields."""
    stop_after_updates: int | None = None
    """End this job after this many updates in all (saving a checkpoint first); --resume continues it."""

    def __post_init__(self):
        require_int(self, "every_updates", minimum=0)
        require_int(self, "keep")
        require_number(self, "every_seconds", low=0.0)
        if self.stop_after_updates is not None:
            require_int(self, "stop_after_updates")


@dataclasses.dataclass(frozen=True)
class AnakinConfig:
    """Anakin: a JAX env and the agent in one jitted program per device."""

    env: str = "CartPole-v1"
    """JAX env: a registered id (CartPole-v1, Acrobot-v1, Pendulum-v1, MatchSign-v0) or 'module:Class'."""
    seed: int = 0
    """Seed of the first training seed; seed i uses seed + i."""
    num_seeds: int = 1
    """Independent seeds trained in one compiled program (vmap over seeds), each with its own metrics."""
    total_steps: int = 500_000
    """Environment steps per seed; rounded down to whole updates."""
    num_envs: int = 4
    """Environments per seed, split evenly over the devices."""
    rollout_length: int = 128
    """Steps per environment between updates."""
    num_devices: int | None = None
    """Local devices to use (the data-parallel mesh); None uses all local devices."""
    updates_per_call: int = 32
    """Updates per compiled call; metrics are logged after each call."""
    eval_every: int = 4
    """Evaluate the greedy policy every this many calls (and after the last); 0 disables periodic evaluation."""
    eval_episodes: int = 32
    """Greedy episodes per evaluation and seed (rounded up to a multiple of the device count)."""
    eval_max_steps: int = 1000
    """Step bound of one evaluation episode (for envs without a time limit)."""
    timeout_s: float = 600.0
    """Init, compile, one train call or one evaluation running longer than this (seconds) fails the run naming it; 0 = never."""
    logging: LoggingConfig = dataclasses.field(default_factory=LoggingConfig)
    """Logging settings."""
    checkpoint: CheckpointConfig = dataclasses.field(default_factory=CheckpointConfig)
    """Checkpoint and resume settings."""

    def __post_init__(self):
        require_int(self, "num_seeds", "total_steps", "num_envs", "rollout_length",
                    "updates_per_call", "eval_episodes", "eval_max_steps")
        require_int(self, "seed", "eval_every", minimum=0)
        require_number(self, "timeout_s", low=0.0)
        if self.num_devices is not None:
            require_int(self, "num_devices")
        if self.total_steps < self.num_envs * self.rollout_length:
            raise ConfigError(
                "total_steps",
                f"{self.total_steps} is less than one update "
                f"(num_envs * rollout_length = {self.num_envs * self.rollout_length})",
            )
        try:
            check_name(self.env)
        except UnknownEnvError as e:
            raise ConfigError("env", str(e)) from None

    @property
    def steps_per_update(self) -> int:
        """Env steps per seed consumed by one update."""
        return self.num_envs * self.rollout_length

    @property
    def num_updates(self) -> int:
        """Updates per seed over the whole run."""
        return self.total_steps // self.steps_per_update

    def check_layout(self, num_devices: int, agent_config: AgentConfig) -> None:
        """Checks what depends on the device count, before anything compiles."""
        if self.num_envs % num_devices:
            raise ConfigError(
                "num_envs",
                f"{self.num_envs} environments cannot be split evenly over {num_devices} devices; "
                f"use a multiple of {num_devices}",
            )
        agent_config.check_batch(self.rollout_length, self.num_envs // num_devices)
