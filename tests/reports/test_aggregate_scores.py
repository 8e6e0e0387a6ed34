"""scripts/aggregate_scores.py: IQM, optimality gap and the stratified bootstrap (Agarwal et al. 2021)."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import aggregate_scores as agg  # noqa: E402


def test_iqm_is_the_mean_of_the_middle_half():
    scores = np.array([[0.0, 10.0], [1.0, 2.0], [3.0, 100.0], [4.0, 5.0]])  # [runs, games]: 8 values
    # sorted 0 1 2 3 4 5 10 100: cut 2 at each end -> mean(2, 3, 4, 5)
    assert agg.iqm(scores) == pytest.approx(3.5)
    from scipy import stats

    rng = np.random.default_rng(1)
    for shape in [(3, 4), (5, 1), (10, 3)]:
        x = rng.normal(size=shape)
        assert agg.iqm(x) == pytest.approx(stats.trim_mean(x, 0.25, axis=None))


def test_optimality_gap_counts_only_the_shortfall_below_gamma():
    scores = np.array([[0.5, 2.0], [1.0, 0.0]])
    assert agg.optimality_gap(scores) == pytest.approx((0.5 + 0 + 0 + 1.0) / 4)


def test_the_bootstrap_resamples_seeds_within_each_game():
    """One game always scores 0, the other always 1: every stratified replicate has half of each,
    so the mean cannot move; a bootstrap pooling the games' runs would give a wide interval."""
    scores = np.array([[0.0, 1.0]] * 4)
    e = agg.stratified_bootstrap(scores, lambda s: s.mean(axis=(-2, -1)), reps=2000)
    assert (e.value, e.low, e.high) == (0.5, 0.5, 0.5)


def test_the_interval_holds_the_estimate_and_is_reproducible():
    rng = np.random.default_rng(3)
    scores = rng.uniform(size=(5, 3))
    e = agg.stratified_bootstrap(scores, agg.iqm)
    assert e.low < e.value < e.high and e.high - e.low < 1.0
    assert agg.stratified_bootstrap(scores, agg.iqm) == e  # a fixed seed: a rebuilt report says the same


def test_report_lines_normalize_by_the_published_return_and_skip_missing_evals():
    lines = agg.aggregate_lines({"final return": [[10.0, 20.0], [50.0, 50.0]],
                                 "greedy eval": [[10.0, math.nan], [50.0, 50.0]]}, [20.0, 100.0], ["A", "B"])
    text = "\n".join(lines)
    assert "2 seeds x 2 game(s) (A, B)" in text
    # normalized: A 0.5, 1.0; B 0.5, 0.5 -> IQM of (0.5 0.5 0.5 1.0) = 0.5, gap (0.5 * 3) / 4; a replicate
    # drawing A's 1.0 twice (1 in 4) has IQM 0.75 and gap 0.25, one drawing A's 0.5 twice has gap 0.5
    assert "| final return | 0.50 [0.50, 0.75] | 0.38 [0.25, 0.50] |" in text
    assert "| greedy eval | n/a" in text


def test_a_multi_seed_report_has_the_aggregate_a_one_seed_report_has_none():
    import reproduce_report
    from podrl.cli import presets

    preset = presets.get("minatar-ppo")
    invocation = {"argv": ["minatar-ppo"], "date": "2026-12-03", "machine": "m", "stop_after_s": None,
                  "notes": ["A note from results.json."]}
    three = [reproduce_report.EnvResult(env, 3, 1000, [14.0, 7.0, 16.0], [17.0, 7.0, 17.0], 60.0, 900.0, [])
             for env in ("gymnax:Breakout-MinAtar", "gymnax:Freeway-MinAtar")]
    text = reproduce_report.report(preset, three, invocation)
    assert "Aggregate over 3 seeds x 2 game(s)" in text and "| final return | " in text
    assert "A note from results.json." in text and "SPS: the median over the run's records" in text
    one = [r._replace(seeds=1, final_return=[14.0], eval_return=[17.0]) for r in three]
    assert "Aggregate" not in reproduce_report.report(preset, one, invocation)
