"""Aggregate scores over seeds and games: IQM and optimality gap with stratified-bootstrap intervals.

    podrl aggregate docs/results/minatar-ppo-1e7 docs/results/minatar-ppo-1e7-b   # 4 MinAtar games, 3 seeds

A reproduction report (`podrl reproduce`) has this table over its own envs; `podrl aggregate`
(`podrl.reports.reproduce.aggregate_main`) prints it over the envs of several reports (their
results.json), each normalized by its preset's published return. This module is the statistics only.

Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge of the Statistical Precipice"
(the `rliable` library): the interquartile mean (IQM) of all runs' normalized scores, the
optimality gap (how far the runs fall short of a normalized score of 1, on average), and a
95% percentile confidence interval from a *stratified* bootstrap: each replicate resamples the
seeds of every game independently, with replacement, so each game keeps its number of runs.

Written in NumPy here: `rliable` 1.2.0 installs but does not import beside pandas 3 (its
`arch` dependency calls a pandas decorator whose signature changed).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

REPS = 10_000
"""Bootstrap replicates."""

CONFIDENCE = 0.95
"""The size of the percentile confidence interval."""

SEED = 0
"""The bootstrap's random seed: a rebuilt report gives the same intervals."""


class Estimate(NamedTuple):
    """A statistic of the runs and its stratified-bootstrap confidence interval."""

    value: float
    low: float
    high: float


def iqm(scores: np.ndarray) -> np.ndarray:
    """The interquartile mean of `scores` `[..., runs, games]` over its last two axes: the mean of
    the middle 50% of the values (a quarter of them, rounded down, cut at each end) -> `[...]`."""
    flat = np.sort(scores.reshape(*scores.shape[:-2], -1), axis=-1)
    cut = int(0.25 * flat.shape[-1])
    return flat[..., cut:flat.shape[-1] - cut].mean(axis=-1)


def optimality_gap(scores: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """The mean over runs and games of `max(gamma - score, 0)`, `[..., runs, games]` -> `[...]`."""
    return np.maximum(gamma - scores, 0.0).mean(axis=(-2, -1))


def stratified_bootstrap(scores: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray],
                         reps: int = REPS, seed: int = SEED, confidence: float = CONFIDENCE) -> Estimate:
    """`statistic` of `scores` `[runs, games]` and its percentile interval over `reps` replicates,
    each drawing `runs` runs with replacement within every game (column) separately."""
    runs, games = scores.shape
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, runs, size=(reps, runs, games))  # [reps, runs, games]: a run index per game
    replicates = statistic(np.take_along_axis(np.broadcast_to(scores, (reps, runs, games)), picks, axis=1))
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return Estimate(float(statistic(scores)), float(low), float(high))


def normalized(per_game: list[list[float]], published: list[float]) -> np.ndarray | None:
    """`[runs, games]` scores divided by each game's published return; None when a game's runs
    differ in number, a score is not finite, or a published return is not positive."""
    if not per_game or len({len(runs) for runs in per_game}) != 1 or not all(p > 0 for p in published):
        return None
    scores = np.asarray(per_game, dtype=np.float64).T / np.asarray(published)
    return scores if np.isfinite(scores).all() else None


def aggregate_lines(rows: dict[str, list[list[float]]], published: list[float], games: list[str]) -> list[str]:
    """The report's markdown: one table row per score kind (`rows`: kind -> per-game per-seed scores)."""
    runs = len(next(iter(rows.values()))[0]) if rows and next(iter(rows.values())) else 0
    lines = [f"Aggregate over {runs} seeds x {len(games)} game(s) ({', '.join(games)}), each score divided by "
             "the game's published return (1 = the published figure): interquartile mean (IQM) and optimality "
             "gap (mean shortfall below 1), with 95% stratified-bootstrap confidence intervals "
             f"({REPS:,} replicates resampling the seeds of each game; Agarwal et al. 2021).", "",
             "| score | IQM [95% CI] | optimality gap [95% CI] |", "|---|---|---|"]
    for kind, per_game in rows.items():
        scores = normalized(per_game, published)
        if scores is None:
            lines.append(f"| {kind} | n/a (a seed without this score) | n/a |")
            continue
        cells = [stratified_bootstrap(scores, f) for f in (iqm, optimality_gap)]
        lines.append(f"| {kind} | " + " | ".join(_cell(e) for e in cells) + " |")
    return lines


def _cell(e: Estimate) -> str:
    return f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]" if math.isfinite(e.value) else "n/a"
