"""podrl.reports.aggregate (`podrl aggregate`): IQM, optimality gap and the stratified bootstrap (Agarwal et al.
2021)."""

import math

import numpy as np
import pytest

from podrl.reports import aggregate as agg
from podrl.reports import report as reproduce_report
from podrl.reports.reproduce import aggregate_main


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


def write_report(folder, argv: list[str], envs: list[tuple[str, list[float], list[float]]]):
    """A `podrl reproduce` folder's results.json: the invocation and one row per (env, final, eval)."""
    import json

    folder.mkdir()
    rows = [reproduce_report.EnvResult(env, len(final), 1000, final, evals, 60.0, 900.0, [])._asdict()
            for env, final, evals in envs]
    (folder / "results.json").write_text(json.dumps({"argv": argv, "date": "d", "machine": "m", "envs": rows}))
    return str(folder)


def test_the_aggregate_command_pools_the_games_of_several_reports(tmp_path, capsys):
    """Breakout (published 28) and Freeway (58) from two minatar-ppo reports: the same numbers as
    the A / B case above, each game normalized by its own preset anchor; a one-seed env is left out."""
    a = write_report(tmp_path / "a", ["--seeds", "2", "minatar-ppo"],
                     [("gymnax:Breakout-MinAtar", [14.0, 28.0], [14.0, math.nan])])
    b = write_report(tmp_path / "b", ["minatar-ppo", "--seeds", "2"],
                     [("gymnax:Freeway-MinAtar", [29.0, 29.0], [29.0, 29.0]),
                      ("gymnax:Asterix-MinAtar", [1.0], [1.0])])
    assert aggregate_main([a, b]) == 0
    text = capsys.readouterr().out
    assert "2 seeds x 2 game(s) (gymnax:Breakout-MinAtar, gymnax:Freeway-MinAtar)" in text
    assert "| final return | 0.50 [0.50, 0.75] | 0.38 [0.25, 0.50] |" in text
    assert "| greedy eval | n/a" in text

    assert aggregate_main([a, a]) == 2
    assert "share an env: gymnax:Breakout-MinAtar, gymnax:Breakout-MinAtar" in capsys.readouterr().err
    one = write_report(tmp_path / "one", ["minatar-ppo"], [("gymnax:Asterix-MinAtar", [1.0], [1.0])])
    assert aggregate_main([one]) == 2
    assert "no env with more than one seed and a published return" in capsys.readouterr().err
    unknown = write_report(tmp_path / "unknown", ["no-such-preset"], [("gymnax:Asterix-MinAtar", [1.0], [1.0])])
    assert aggregate_main([unknown]) == 2
    assert "names no preset" in capsys.readouterr().err
