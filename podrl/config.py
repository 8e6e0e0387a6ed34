"""Frozen, validated run configs. Every field carries a one-line doc (tyro shows it).

Field checks that need nothing but the config run in `__post_init__`, so a bad
value fails before JAX compiles anything; checks that need the device count run
in `check_layout` before the first trace. Errors are `ConfigError`s that start
with the field name.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar

import tyro

from envs.registry import UnknownEnvError, check_name
from podrl.errors import ConfigError, require_int, require_number
from podrl.population import check_sweep, parse_sweep
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
    profile: Annotated[str | None, tyro.conf.arg(aliases=("--profile",))] = None
    """Write a jax.profiler trace of a few training calls into this folder (open it in perfetto or TensorBoard)."""


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
    """End this job after this many updates (counted from its start or resume point, checkpoint first); --resume continues it."""

    def __post_init__(self):
        require_int(self, "every_updates", minimum=0)
        require_int(self, "keep")
        require_number(self, "every_seconds", low=0.0)
        if self.stop_after_updates is not None:
            require_int(self, "stop_after_updates")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """What every layout's run has: the env, the seed, the budget, evaluation, logging, checkpoints.

    Layout configs (`AnakinConfig`, `podrl.sebulba.SebulbaConfig`) extend it; their
    `__post_init__` calls this one's, so these checks are written once.
    """

    layout: ClassVar[str] = ""
    """The layout name runs and checkpoints record (set by each layout's config)."""

    env: str = "CartPole-v1"
    """Anakin: a JAX env id (CartPole-v1, Acrobot-v1, Pendulum-v1, MatchSign-v0), 'gymnax:<id>' or 'craftax:<id>' (env params as ',field=value' after the id) or 'module:Class'. Sebulba: a gymnasium id, 'jax:<id>', 'gymnax:<id>', 'craftax:<id>', 'dm_env:module:factory', 'ale:Pong', 'envpool:<id>' or 'module:factory'."""
    seed: int = 0
    """Seed of params, envs and PRNG keys (Anakin's seed i of --num-seeds uses seed + i)."""
    total_steps: int = 500_000
    """Environment steps (Anakin: per seed; Sebulba: of this process's actors); rounded down to whole updates."""
    eval_every: int = 128
    """Evaluate the greedy policy every this many updates (after the logged call that reaches or passes each multiple) and at the end; 0 = only at the end."""
    eval_episodes: int = 32
    """Greedy episodes per evaluation (Anakin: per seed, rounded up to a multiple of the device count)."""
    eval_max_steps: int = 1000
    """Step bound of one evaluation episode (for envs without a time limit)."""
    logging: LoggingConfig = dataclasses.field(default_factory=LoggingConfig)
    """Logging settings."""
    checkpoint: CheckpointConfig = dataclasses.field(default_factory=CheckpointConfig)
    """Checkpoint and resume settings."""

    def __post_init__(self):
        require_int(self, "total_steps", "eval_max_steps")
        require_int(self, "seed", "eval_every", "eval_episodes", minimum=0)
        if not isinstance(self.env, str) or not self.env:
            raise ConfigError("env", f"must be a non-empty env name, got {self.env!r}")
        if self.total_steps < self.steps_per_update:
            raise ConfigError("total_steps", f"{self.total_steps} is less than one update "
                                             f"({self.steps_per_update} steps)")

    @property
    def steps_per_update(self) -> int:
        """Env steps (of this process) consumed by one update."""
        raise NotImplementedError

    @property
    def num_updates(self) -> int:
        """Updates over the whole run."""
        return self.total_steps // self.steps_per_update

    def logged_steps(self, updates: int, num_processes: int) -> int:
        """The env-step count a run logs after `updates` updates (`steps_per_update` is already global)."""
        return updates * self.steps_per_update


@dataclasses.dataclass(frozen=True)
class AnakinConfig(RunConfig):
    """Anakin: a JAX env and the agent in one jitted program per device."""

    layout: ClassVar[str] = "anakin"
    """The layout name runs and checkpoints record."""

    num_seeds: int = 1
    """Independent seeds trained in one compiled program (vmap over seeds), each with its own metrics."""
    num_envs: int = 4
    """Environments per seed, split evenly over the devices."""
    rollout_length: int = 128
    """Steps per environment between updates."""
    num_devices: int | None = None
    """Local devices to use (the data-parallel mesh); None uses all local devices."""
    updates_per_call: int = 32
    """Updates per compiled call; metrics are logged (and evaluation, PBT, checkpoints may follow) after each call."""
    timeout_s: float = 600.0
    """Init, compile, one train call or one evaluation running longer than this (seconds) fails the run naming it; 0 = never."""
    population: int = 0
    """Population members trained in one program (member i: seed + i, its own swept hyperparameters); 0 = no population (--num-seeds)."""
    sweep: tuple[str, ...] = ()
    """Per-member agent hyperparameters, FIELD=SPEC each: agent.entropy_coef=0.0,0.01 (grid) or agent.learning_rate=loguniform:1e-4:3e-3 / uniform:LOW:HIGH (random)."""
    population_shards: int = 1
    """Devices along the mesh's population axis (members split over them); the rest of the devices are data-parallel shards."""
    pbt_every: int = 0
    """Population-based training: exploit and explore every this many updates (after the call crossing it); 0 = off."""
    pbt_fraction: float = 0.25
    """PBT truncation selection: the bottom this fraction of members copies a member of the top this fraction."""
    pbt_perturb: tuple[float, ...] = (0.8, 1.2)
    """PBT explore: each swept hyperparameter of a copied member is multiplied by one of these factors (drawn uniformly)."""

    def __post_init__(self):
        require_int(self, "num_seeds", "num_envs", "rollout_length", "updates_per_call", "eval_episodes",
                    "population_shards")
        require_int(self, "population", "pbt_every", minimum=0)
        require_number(self, "timeout_s", low=0.0)
        require_number(self, "pbt_fraction", low=0.0, high=0.5, low_open=True)
        self._check_population()
        if self.num_devices is not None:
            require_int(self, "num_devices")
        super().__post_init__()
        try:
            check_name(self.env)
        except UnknownEnvError as e:
            raise ConfigError("env", str(e)) from None

    def _check_population(self) -> None:
        if not isinstance(self.sweep, tuple):
            raise ConfigError("sweep", f"must be a tuple of FIELD=SPEC strings, got {self.sweep!r}")
        parse_sweep(self.sweep)  # syntax; the fields are checked against the agent in check_layout
        if self.population and self.num_seeds != 1:
            raise ConfigError("num_seeds", "a population's member i already trains from seed + i; "
                                           "give --population or --num-seeds, not both")
        if (self.sweep or self.pbt_every) and not self.population:
            raise ConfigError("population", "--sweep and --pbt-every need a population (--population N)")
        if self.pbt_every and not self.sweep:
            raise ConfigError("pbt_every", "PBT perturbs the swept hyperparameters; give --sweep")
        if not self.pbt_perturb or not all(isinstance(f, (int, float)) and f > 0 for f in self.pbt_perturb):
            raise ConfigError("pbt_perturb", f"must be positive factors, got {self.pbt_perturb!r}")

    @property
    def members(self) -> int:
        """Size of the vmapped leading axis: population members, or seeds without a population."""
        return self.population or self.num_seeds

    @property
    def steps_per_update(self) -> int:
        """Env steps per seed consumed by one update."""
        return self.num_envs * self.rollout_length

    def check_layout(self, num_devices: int, agent_config: AgentConfig) -> None:
        """Checks what depends on the device count and the agent, before anything compiles."""
        if num_devices % self.population_shards:
            raise ConfigError("population_shards", f"{self.population_shards} rows do not divide the "
                                                   f"{num_devices} devices")
        if self.members % self.population_shards:
            field = "population" if self.population else "num_seeds"
            raise ConfigError(field, f"{self.members} members cannot be split evenly over the mesh's "
                                     f"{self.population_shards} population rows (population_shards); "
                                     f"use a multiple of {self.population_shards}")
        check_sweep(parse_sweep(self.sweep), agent_config, self.members)
        data_shards = num_devices // self.population_shards
        if self.num_envs % data_shards:
            raise ConfigError(
                "num_envs",
                f"{self.num_envs} environments cannot be split evenly over {data_shards} devices; "
                f"use a multiple of {data_shards}",
            )
        agent_config.check_batch(self.rollout_length, self.num_envs // data_shards)
