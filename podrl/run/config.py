"""Frozen, validated run configs both layouts share (each layout's own config extends `RunConfig`:
`podrl.anakin.config.AnakinConfig`, `podrl.sebulba.config.SebulbaConfig`). Every field carries a one-line doc (tyro
shows it),
and, declared with it (`podrl.run.options.option`), its `--help` box, whether it may change on `--resume`
and its `--help` wording where a layout words it its own way.

Field checks that need nothing but the config run in `__post_init__`, so a bad
value fails before JAX compiles anything; checks that need the device count run
in `check_layout` before the first trace. Errors are `ConfigError`s that start
with the field name.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, ClassVar

import tyro

from podrl.core.errors import ConfigError, require_bool, require_choice, require_int, require_number
from podrl.envs.schemes import LAYOUTS, help_text
from podrl.run.options import MAY_CHANGE, option


@dataclasses.dataclass(frozen=True)
class LoggingConfig:
    """Where and how a run reports."""

    run_dir: str | None = "runs"
    """Parent folder of the run directory (config.json, metrics.jsonl, TensorBoard); None writes no files."""
    run_name: str | None = None
    """Name of this run's folder under run_dir; default: '<env>__<layout>__seed<seed>__<time>' (e.g.
    CartPole-v1__anakin__seed0__20250101-120000)."""
    tensorboard: bool = True
    """Also write TensorBoard event files (needs tensorboardX, the 'tensorboard' extra)."""
    console: bool = option(True, help={"anakin": "Print a progress line after each compiled call (--updates-per-call "
                                                 "updates).",
                                       "sebulba": "Print a progress line every --log-every updates."})
    """Print a progress line after each logged record."""
    profile: Annotated[str | None, tyro.conf.arg(aliases=("--profile",))] = None
    """Write a jax.profiler trace of a few training calls into this folder (open it in perfetto or TensorBoard)."""
    profile_startup: Annotated[bool, tyro.conf.arg(aliases=("--profile-startup",))] = False
    """Print where the seconds from process start to the result went (imports, setup, each program's trace,
    lowering and compile, the training calls, the evaluations; wall and CPU seconds) and write them to the run
    folder's stages.json."""
    wandb_project: str | None = None
    """Also log config and metrics (per seed/member too) to this Weights & Biases project (the 'wandb' extra)."""
    wandb_entity: str | None = None
    """The W&B entity (user or team) of the project; None = your default entity."""
    wandb_mode: str | None = None
    """W&B mode: 'online', 'offline' (sync later with `wandb sync`) or 'disabled'; None = WANDB_MODE, else online."""

    def __post_init__(self):
        if self.wandb_mode is not None:
            require_choice(self, "wandb_mode", ("online", "offline", "disabled"))


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
    """End this job after this many updates (counted from its start or resume point, checkpoint first); --resume
    continues it."""

    def __post_init__(self):
        require_int(self, "every_updates", minimum=0)
        require_int(self, "keep")
        require_number(self, "every_seconds", low=0.0)
        if self.stop_after_updates is not None:
            require_int(self, "stop_after_updates")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """What every layout's run has: the env, the seed, the budget, evaluation, logging, checkpoints.

    Layout configs (`podrl.anakin.config.AnakinConfig`, `podrl.sebulba.config.SebulbaConfig`) extend it; their
    `__post_init__` calls this one's, so these checks are written once.
    """

    layout: ClassVar[str] = ""
    """The layout name runs and checkpoints record (set by each layout's config)."""

    env: str = option("CartPole-v1", box="env", help={layout: help_text(layout) for layout in LAYOUTS})
    """The env: a name of a form the layout takes (`podrl.envs.schemes`; `--help` lists them)."""
    seed: int = option(0, help={
        "anakin": "Seed of params, envs and PRNG keys (seed i of --num-seeds, or member i of --population, uses "
                  "seed + i).",
        "sebulba": "Seed of params, envs and PRNG keys (each actor thread and learner shard derives its own)."})
    """Seed of params, envs and PRNG keys (each layout derives its seeds' and threads' own from it)."""
    total_steps: int = option(500_000, on_resume=MAY_CHANGE, help={
        "anakin": "Environment steps per seed (or population member); rounded down to whole updates.",
        "sebulba": "Environment steps of this process's actors; rounded down to whole updates."})
    """Environment steps to train for (per seed, or per process: the layouts' --help says); rounded down to whole
    updates."""
    eval_every: int = option(128, box="evaluation", on_resume=MAY_CHANGE, help={
        "anakin": "Evaluate the greedy policy every this many updates (after the compiled call of --updates-per-call "
                  "updates that reaches or passes each multiple), and at the end; 0 = only at the end."})
    """Evaluate the greedy policy every this many updates (after the record that reaches or passes each multiple) and at
    the end; 0 = only at the end."""
    eval_episodes: int = option(32, box="evaluation", on_resume=MAY_CHANGE, help={
        "anakin": "Greedy episodes per evaluation, per seed (rounded up to a multiple of the device count); "
                  "0 = no evaluation (no eval program is compiled)."})
    """Greedy episodes per evaluation; 0 = no evaluation."""
    eval_max_steps: int = option(1000, box="evaluation", on_resume=MAY_CHANGE)
    """Step bound of one evaluation episode (for envs without a time limit)."""
    eval_async: bool = option(False, box="evaluation", on_resume=MAY_CHANGE)
    """Evaluate in a background thread on a copy of update k's params while training goes on (logged at k as its own
    record; at most one in flight)."""
    stop_at_return: float | None = option(None, box="evaluation", on_resume=MAY_CHANGE)
    """Stop the run at the first evaluation whose greedy return reaches this (every seed's and member's), with its final
    checkpoint; needs eval_every > 0 and no eval_async. None = run to total_steps."""
    compile_cache: str = option("auto", on_resume=MAY_CHANGE)
    """Persistent compilation cache (training scripts): 'auto' (JAX_COMPILATION_CACHE_DIR, else ~/.cache/podrl/jax),
    'none', or a folder."""
    skip_agent_check: bool = option(False, on_resume=MAY_CHANGE)
    """Skip the check run before training an agent that is not podrl's own on more than one learner shard: one update on
    2 shards holding the same batch must end where 1 shard does (gradients through learner_value_and_grad, not summed;
    podrl.testing.check_agent). It holds 4 copies of the train state: skip it for a replay that fills a device."""
    logging: LoggingConfig = option(default_factory=LoggingConfig, on_resume=MAY_CHANGE)
    """Logging settings."""
    checkpoint: CheckpointConfig = option(default_factory=CheckpointConfig, on_resume=MAY_CHANGE)
    """Checkpoint and resume settings."""

    def __post_init__(self):
        require_int(self, "total_steps", "eval_max_steps")
        require_int(self, "seed", "eval_every", "eval_episodes", minimum=0)
        require_bool(self, "eval_async", "skip_agent_check")
        self._check_stop_at_return()
        if not isinstance(self.env, str) or not self.env:
            raise ConfigError("env", f"must be a non-empty env name, got {self.env!r}")
        if self.total_steps < self.steps_per_update:
            raise ConfigError("total_steps", f"{self.total_steps} is less than one update "
                                             f"({self.steps_per_update} steps)")

    def _check_stop_at_return(self) -> None:
        if self.stop_at_return is None:
            return
        require_number(self, "stop_at_return", low=-math.inf)
        needs = ("eval_episodes is 0 (no evaluation)" if not self.eval_episodes else
                 "eval_every is 0 (one evaluation, at the end)" if not self.eval_every else
                 "eval_async is on (its returns arrive updates later)" if self.eval_async else None)
        if needs:
            raise ConfigError("stop_at_return", f"needs periodic evaluations in the training loop, but {needs}")

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

