"""The frozen, validated Anakin run config (one-line doc per field for tyro).

Field checks that need nothing but the config run in `__post_init__`; checks that
need the device count and the agent run in `check_layout` before the first trace.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

from podrl.core.errors import ConfigError, require_int, require_number
from podrl.core.population import SweepAxis, check_sweep, parse_sweep
from podrl.core.types import AgentConfig
from podrl.envs.registry import check_name
from podrl.run.config import RunConfig
from podrl.run.options import MAY_CHANGE, option


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
    num_devices: int | None = option(None, on_resume=MAY_CHANGE)
    """Local devices to use (the data-parallel mesh); None uses all local devices. May change on resume (the checkpoint
    is restored onto the new mesh)."""
    updates_per_call: int = option(32, on_resume=MAY_CHANGE)
    """Updates per compiled call; metrics are logged (and evaluation, PBT, checkpoints may follow) after each call."""
    timeout_s: float = option(600.0, on_resume=MAY_CHANGE)
    """Init, compile, one train call or one evaluation running longer than this (seconds) fails the run naming it; 0 =
    never."""
    population: int = option(0, box="population")
    """Population members trained in one program (member i: seed + i, its own swept hyperparameters); 0 = no population
    (--num-seeds)."""
    sweep: tuple[str, ...] = option((), box="population")
    """Per-member agent hyperparameters, FIELD=SPEC each: agent.entropy_coef=0.0,0.01 (grid) or
    agent.learning_rate=loguniform:1e-4:3e-3 / uniform:LOW:HIGH (random)."""
    population_shards: int = option(1, box="population")
    """Devices along the mesh's population axis (members split over them); the rest of the devices are data-parallel
    shards."""
    pbt_every: int = option(0, box="population")
    """Population-based training: exploit and explore every this many updates (after the call crossing it); 0 = off."""
    pbt_fraction: float = option(0.25, box="population")
    """PBT truncation selection: the bottom this fraction of members copies a member of the top this fraction."""
    pbt_perturb: tuple[float, ...] = option((0.8, 1.2), box="population")
    """PBT explore: each swept hyperparameter of a copied member is multiplied by one of these factors (drawn
    uniformly)."""

    def __post_init__(self):
        require_int(self, "num_seeds", "num_envs", "rollout_length", "updates_per_call", "population_shards")
        require_int(self, "population", "pbt_every", "eval_episodes", minimum=0)
        require_number(self, "timeout_s", low=0.0)
        require_number(self, "pbt_fraction", low=0.0, high=0.5, low_open=True)
        self._check_population()
        if self.num_devices is not None:
            require_int(self, "num_devices")
        super().__post_init__()
        check_name(self.env)  # an UnknownEnvError is the ConfigError of field env

    def _check_population(self) -> None:
        if not isinstance(self.sweep, tuple):
            raise ConfigError("sweep", f"must be a tuple of FIELD=SPEC strings, got {self.sweep!r}")
        _ = self.sweep_axes  # syntax, parsed once; the fields are checked against the agent in check_layout
        if self.population and self.num_seeds != 1:
            raise ConfigError("num_seeds", "a population's member i already trains from seed + i; "
                                           "give --population or --num-seeds, not both")
        if (self.sweep or self.pbt_every) and not self.population:
            raise ConfigError("population", "--sweep and --pbt-every need a population (--population N)")
        if self.pbt_every and not self.sweep:
            raise ConfigError("pbt_every", "PBT perturbs the swept hyperparameters; give --sweep")
        if not self.pbt_perturb or not all(isinstance(f, (int, float)) and f > 0 for f in self.pbt_perturb):
            raise ConfigError("pbt_perturb", f"must be positive factors, got {self.pbt_perturb!r}")

    @functools.cached_property
    def sweep_axes(self) -> tuple[SweepAxis, ...]:
        """`sweep` parsed (`podrl.core.population.parse_sweep`), once."""
        return tuple(parse_sweep(self.sweep))

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
        check_sweep(self.sweep_axes, agent_config, self.members)
        data_shards = num_devices // self.population_shards
        if self.num_envs % data_shards:
            raise ConfigError(
                "num_envs",
                f"{self.num_envs} environments cannot be split evenly over {data_shards} devices; "
                f"use a multiple of {data_shards}",
            )
        agent_config.check_batch(self.rollout_length, self.num_envs // data_shards)
