"""Populations: per-member hyperparameters from a sweep, and population-based training (PBT).

A population is Anakin's vmapped leading axis `[S]` (member i trains from seed `seed + i`,
exactly like seed i of `--num-seeds`) with its own values of the swept agent fields. Those
values are float32 arrays in each member's `TrainState.hyperparams`, which the agent reads
instead of its config's Python constants, so one compiled program serves every member.

Sweep syntax (`--sweep FIELD=SPEC ...`, FIELD an agent field, `agent.` prefix optional):

  agent.entropy_coef=0.0,0.01          a grid axis: these values
  agent.learning_rate=loguniform:1e-4:3e-3   random, log-uniform in [low, high]
  agent.clip_eps=uniform:0.1:0.3       random, uniform in [low, high]

Grid axes combine as a Cartesian product (the first field varies slowest); member i takes
combination `i mod K` of the K combinations, so the population must have at least K
members. Random fields draw one value per member from `numpy.random.default_rng([seed,
SWEEP_STREAM])`: every process of a multi-host run draws the same. Only fields an agent
config lists in `SWEEPABLE` may be swept; fields in its `SHAPE_FIELDS` (and every run field,
e.g. num_envs) change the compiled program's shapes and are refused, naming them.

PBT (Jaderberg et al. 2017, arXiv:1711.09846), when `pbt_every` > 0: after the call that
crosses a multiple of `pbt_every` updates (but the run's last call), members are ranked by that call's mean episode
return (no finished episode ranks last); each member of the bottom `pbt_fraction` copies
the params, optimizer state and hyperparameters of a member drawn uniformly from the top
`pbt_fraction` (truncation selection), then multiplies each swept hyperparameter by a
factor drawn from `pbt_perturb` (clipped to the field's range). A member keeps its own
environments and PRNG keys. The decision is computed on the host from the replicated
metrics with `numpy.random.default_rng([seed, PBT_STREAM, update])`, so every process
decides the same and a resumed run decides as the uninterrupted one did; it is applied
by one jitted gather over the member axis (the train call is not recompiled).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, NamedTuple

import numpy as np

from podrl.core.errors import ConfigError

SWEEP_STREAM = 0x5EE9
"""Second word of the sweep's numpy seed ([seed, SWEEP_STREAM])."""
PBT_STREAM = 0x9B7
"""Second word of each PBT decision's numpy seed ([seed, PBT_STREAM, update])."""

RUN_SHAPE_FIELDS = ("num_envs", "rollout_length", "num_seeds", "population", "updates_per_call", "num_devices")


class SweepAxis(NamedTuple):
    """One `FIELD=SPEC` of a sweep."""

    field: str  # the agent config field
    values: tuple[float, ...] | None  # a grid axis, or None for a random one
    distribution: str | None = None  # "uniform" | "loguniform"
    low: float = 0.0
    high: float = 0.0


def parse_sweep_item(item: str) -> SweepAxis:
    """`FIELD=SPEC` -> `SweepAxis`; ConfigError("sweep") for bad syntax, naming the item."""
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError("sweep", f"{item!r} is not FIELD=SPEC (e.g. agent.learning_rate=loguniform:1e-4:3e-3 "
                                   f"or agent.entropy_coef=0.0,0.01)")
    field, _, spec = item.partition("=")
    field = field.strip().replace("-", "_")
    if field.startswith("run.") or field in RUN_SHAPE_FIELDS:
        name = field.removeprefix("run.")
        raise ConfigError(f"sweep.{name}", f"run fields cannot be swept: {name} changes the compiled program's "
                                           f"shapes; only agent fields listed as sweepable can")
    field = field.removeprefix("agent.")
    try:
        if spec.startswith(("uniform:", "loguniform:")):
            kind, low, high = spec.split(":")
            low, high = float(low), float(high)
            if not (math.isfinite(low) and math.isfinite(high) and low <= high):
                raise ValueError("need finite low <= high")
            if kind == "loguniform" and low <= 0:
                raise ValueError("loguniform needs low > 0")
            return SweepAxis(field, None, kind, low, high)
        values = tuple(float(v) for v in spec.split(","))
        if not values or not all(math.isfinite(v) for v in values):
            raise ValueError("values must be finite numbers")
        return SweepAxis(field, values)
    except ValueError as e:
        raise ConfigError(f"sweep.{field}", f"cannot read {spec!r} ({e}); write v1,v2,... (a grid), "
                                            f"uniform:LOW:HIGH or loguniform:LOW:HIGH") from None


def parse_sweep(items: tuple[str, ...]) -> list[SweepAxis]:
    """All axes of a sweep (syntax only; `check_sweep` checks them against an agent config)."""
    axes = [parse_sweep_item(item) for item in items]
    fields = [a.field for a in axes]
    for f in fields:
        if fields.count(f) > 1:
            raise ConfigError(f"sweep.{f}", "is given more than once")
    return axes


def sweepable(agent_config: Any) -> dict[str, tuple[float, float]]:
    """{field: (low, high)} an agent config allows to sweep (its `SWEEPABLE`; {} when none)."""
    return dict(getattr(type(agent_config), "SWEEPABLE", {}) or {})


def check_sweep(axes: list[SweepAxis], agent_config: Any, members: int) -> None:
    """ConfigError naming the field for an unknown, shape-changing or unsweepable field, a value out
    of the field's range, or a grid with more combinations than members."""
    names = {f.name for f in dataclasses.fields(agent_config)}
    allowed = sweepable(agent_config)
    shape_fields = set(getattr(type(agent_config), "SHAPE_FIELDS", ()))
    agent = type(agent_config).__name__
    for axis in axes:
        where = f"sweep.{axis.field}"
        if axis.field not in names:
            raise ConfigError(where, f"{agent} has no field {axis.field!r}; sweepable: {sorted(allowed)}")
        if axis.field in shape_fields:
            raise ConfigError(where, f"{axis.field} changes the shapes (or structure) of the compiled program, so "
                                     f"members cannot share it; sweepable: {sorted(allowed)}")
        if axis.field not in allowed:
            raise ConfigError(where, f"{agent}.{axis.field} is read as a Python constant at trace time and "
                                     f"cannot vary per member; sweepable: {sorted(allowed)}")
        low, high = allowed[axis.field]
        values = axis.values if axis.values is not None else (axis.low, axis.high)
        bad = [v for v in values if not low <= v <= high]
        if bad:
            raise ConfigError(where, f"{bad[0]} is outside {axis.field}'s range [{low}, {high}]")
    combos = grid_size(axes)
    if combos > members:
        raise ConfigError("population", f"{members} member(s) cannot hold the sweep's {combos} grid combinations; "
                                        f"use --population {combos} (or a multiple)")


def grid_size(axes: list[SweepAxis]) -> int:
    return int(np.prod([len(a.values) for a in axes if a.values is not None], dtype=np.int64))


def member_values(axes: list[SweepAxis], members: int, seed: int) -> dict[str, np.ndarray]:
    """{field: float32 `[members]`}: each member's value of each swept field (module docstring)."""
    out: dict[str, np.ndarray] = {}
    grid = [a for a in axes if a.values is not None]
    combos = list(itertools.product(*(a.values for a in grid)))
    for j, axis in enumerate(grid):
        out[axis.field] = np.asarray([combos[i % len(combos)][j] for i in range(members)], np.float32)
    rng = np.random.default_rng([seed, SWEEP_STREAM])
    for axis in axes:
        if axis.values is None:
            if axis.distribution == "loguniform":
                draw = np.exp(rng.uniform(np.log(axis.low), np.log(axis.high), members))
            else:
                draw = rng.uniform(axis.low, axis.high, members)
            out[axis.field] = draw.astype(np.float32)
    return out


class PBTDecision(NamedTuple):
    """One exploit/explore step: `source[i]` is the member member i copies (i itself when kept)."""

    source: np.ndarray  # int32 [S]
    hyperparams: dict[str, np.ndarray]  # float32 [S] each: the values after explore

    @property
    def replaced(self) -> np.ndarray:
        return np.flatnonzero(self.source != np.arange(self.source.size))


def pbt_decide(fitness: np.ndarray, hyperparams: dict[str, np.ndarray], fraction: float,
               perturb: tuple[float, ...], bounds: dict[str, tuple[float, float]], seed: int,
               update: int) -> PBTDecision:
    """Truncation selection + perturbation (module docstring); pure numpy, same on every process."""
    fitness = np.where(np.isfinite(fitness), np.asarray(fitness, np.float64), -np.inf)
    n = fitness.size
    k = max(1, int(math.floor(fraction * n))) if n > 1 else 0
    rng = np.random.default_rng([seed, PBT_STREAM, update])
    order = np.argsort(fitness, kind="stable")  # worst first; ties broken by member index
    bottom, top = order[:k], order[n - k:]
    source = np.arange(n, dtype=np.int32)
    new = {name: np.array(v, np.float32) for name, v in hyperparams.items()}
    for member in bottom:
        parent = int(top[rng.integers(len(top))])
        if fitness[parent] <= fitness[member]:
            continue  # never copy a member no better than oneself (e.g. all tied)
        source[member] = parent
        for name in sorted(new):
            low, high = bounds.get(name, (-np.inf, np.inf))
            factor = perturb[int(rng.integers(len(perturb)))]
            new[name][member] = np.float32(np.clip(hyperparams[name][parent] * factor, low, high))
    return PBTDecision(source, new)


def lineage_record(decision: PBTDecision) -> dict[str, Any]:
    """What metrics.jsonl records of a PBT step: `pbt/parent` (a list: who each member copied,
    itself when kept) and `pbt/replaced` (how many copied)."""
    return {"pbt/parent": [int(s) for s in decision.source], "pbt/replaced": int(decision.replaced.size)}
