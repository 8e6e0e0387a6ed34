"""podrl.reports.plot (`podrl plot`): synthetic run directories (single- and multi-seed) -> PNG files; the error
case."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from podrl.reports import plot
from podrl.reports import report as reproduce_report

PODRL = [sys.executable, "-m", "podrl"]
FIGURES = ("return_vs_steps.png", "return_vs_wall_time.png", "sps_vs_steps.png")


def write_run(path: Path, records: list[dict], config: dict | None = None) -> Path:
    path.mkdir(parents=True)
    with open(path / "metrics.jsonl", "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))
    return path


def single_seed_run(path: Path) -> Path:
    """Sebulba-like: a scalar return per record, one eval at the end, a null return early on."""
    records = [{"step": 2048 * (i + 1), "wall_time": 1.0 + 0.5 * i, "sps": 4000.0 + 100 * i,
                "episode_return": None if i == 0 else 10.0 + 8 * i, "policy_lag_mean": 1.0} for i in range(12)]
    records[-1]["eval_return"] = 150.0
    return write_run(path, records, {"run": {"env": "CartPole-v1", "actor_devices": [0]}, "agent": {"clip_eps": 0.2}})


def multi_seed_run(path: Path) -> Path:
    """Anakin-like with 3 seeds: means plus `_per_seed` lists (one seed without episodes at first)."""
    records = []
    for i in range(10):
        per_seed = [20.0 + 10 * i + d for d in (-5.0, 0.0, 5.0)]
        if i == 0:
            per_seed[0] = None
        finite = [v for v in per_seed if v is not None]
        record = {"step": 16384 * (i + 1), "wall_time": 3.0 + i, "sps": 150000.0 + 1000 * i,
                  "episode_return": sum(finite) / len(finite), "episode_return_per_seed": per_seed}
        if i % 4 == 3 or i == 9:
            evals = [100.0 + 20 * i + d for d in (-10.0, 0.0, 10.0)]
            record.update(eval_return=sum(evals) / 3, eval_return_per_seed=evals)
        records.append(record)
    return write_run(path, records, {"run": {"env": "CartPole-v1", "num_seeds": 3}, "agent": {"clip_eps": 0.2}})


def run_plot(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PODRL, "plot", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(150)
def test_plots_single_and_multi_seed_runs(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import numpy as np

    single = single_seed_run(tmp_path / "cartpole_sebulba")
    multi = multi_seed_run(tmp_path / "cartpole_anakin_3seeds")
    # a half-written last line (a run still in progress) is tolerated
    with open(single / "metrics.jsonl", "a") as f:
        f.write('{"step": 999')
    out = tmp_path / "plots"
    result = run_plot(str(single), str(multi), "--out", str(out))
    assert result.returncode == 0, result.stderr
    for name in FIGURES:
        path = out / name
        assert path.is_file(), name
        assert path.stat().st_size > 15_000, (name, path.stat().st_size)
        image = mpimg.imread(path)
        assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 500, image.shape
        assert float(np.std(image[..., :3])) > 0.01, name  # not a blank canvas
        assert str(path) in result.stdout


@pytest.mark.timeout(150)
def test_multi_seed_series_has_a_min_max_band():

    records = [{"step": 1, "r": 2.0, "r_per_seed": [1.0, None, 3.0]}, {"step": 2, "r": None},
               {"step": 3, "r": 5.0, "r_per_seed": [4.0, 5.0, 6.0]}]
    s = plot.series(records, "step", "r")
    assert s.x == [1.0, 3.0] and s.mean == [2.0, 5.0]
    assert s.low == [1.0, 4.0] and s.high == [3.0, 6.0]
    assert plot.series([{"step": 1, "r": 2.0}], "step", "r").low is None  # one seed: no band


@pytest.mark.timeout(150)
def test_directory_without_metrics_is_a_clear_error(tmp_path):
    good = single_seed_run(tmp_path / "good")
    empty = tmp_path / "not_a_run"
    empty.mkdir()
    result = run_plot(str(good), str(empty), "--out", str(tmp_path / "plots"))
    assert result.returncode == 2
    assert str(empty) in result.stderr and "metrics.jsonl" in result.stderr
    assert not (tmp_path / "plots").exists()  # nothing written before the inputs are checked
    missing = run_plot(str(tmp_path / "does_not_exist"))
    assert missing.returncode == 2 and "does_not_exist" in missing.stderr


def _captured_figures(monkeypatch):
    """The figures the plotting code closes (it closes each after saving), kept open for inspection."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    return figures


@pytest.mark.timeout(150)
def test_a_run_with_one_record_is_drawn_with_markers_and_a_warning(tmp_path, monkeypatch, capsys):
    """A run shorter than its logging interval has one record per curve: a line without markers
    draws nothing at all (an empty PNG), so every short curve has markers and a warning."""

    run = write_run(tmp_path / "short", [{"step": 2048, "wall_time": 1.0, "sps": 900.0, "episode_return": 12.0,
                                          "eval_return": 20.0}])
    figures = _captured_figures(monkeypatch)
    plot.plot_runs([plot.Run(run, "short", plot.read_records(run))], tmp_path / "plots")
    lines = [line for fig in figures for ax in fig.axes for line in ax.lines]
    assert len(lines) == 5  # episode and eval return twice (steps, wall time), SPS once
    assert all(len(line.get_xdata()) == 1 and line.get_marker() not in (None, "None", "") for line in lines)
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 5 and "1 point(s)" in warnings[0] and str(run) in warnings[0]


@pytest.mark.timeout(150)
def test_the_legend_sits_below_the_axes_and_leaves_the_y_label_in_the_figure(tmp_path, monkeypatch):

    runs = [single_seed_run(tmp_path / "a_long_run_directory_name_one"),
            multi_seed_run(tmp_path / "a_long_run_directory_name_two")]
    figures = _captured_figures(monkeypatch)
    out = tmp_path / "plots"
    plot.plot_runs([plot.Run(r, plot.run_label(r), plot.read_records(r)) for r in runs], out)
    fig = figures[0]
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    legend, axes_box = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    assert legend.y1 <= axes_box.y0  # under the plotting area: it covers no curve
    ylabel = ax.yaxis.label.get_window_extent(renderer)
    assert ylabel.x0 >= 0 and ylabel.width > 0
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("mean, min-max over seeds" in t for t in texts if "two" in t)
    assert not any("min-max" in t for t in texts if "one" in t)  # one seed: no band, none claimed


@pytest.mark.timeout(150)
def test_a_one_seed_learning_curve_does_not_claim_a_band(tmp_path, monkeypatch):

    records = [{"step": 1000 * (i + 1), "episode_return": float(i)} for i in range(5)]
    result = reproduce_report.EnvResult("ale:Pong", 1, 5000, [4.0], [4.0], 1.0, 1.0, [])
    figures = _captured_figures(monkeypatch)
    reproduce_report.plot_env(result, plot.series(records, "step", "episode_return"), None, tmp_path / "p.png")
    (text,) = [t.get_text() for t in figures[0].axes[0].get_legend().get_texts()]
    assert text == "podrl, 1 seed"
    assert figures[0].axes[0].lines[0].get_marker() not in (None, "None", "")
