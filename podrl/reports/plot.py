"""`podrl plot`: the metrics.jsonl of one or more podrl run directories as PNG files.

    podrl plot runs/CartPole-v1__anakin__seed0__20250101-120000 runs/other_run --out plots

Writes three figures into --out (created if missing):
  return_vs_steps.png       episode return (solid) and greedy eval return (dashed, markers) vs env steps
  return_vs_wall_time.png   the same vs wall-clock seconds since the run started (compile included)
  sps_vs_steps.png          env steps per second vs env steps
and, for each population run (`--population N --sweep ...`), one more:
  population_<run dir name>.png   each member's return and swept hyperparameters vs env steps,
                                  with PBT's lineage: a grey line from the parent's value to the
                                  copy's perturbed value at every exploit step (`pbt/parent` records)
One colour per run; the legend is the run directory's name, with the layout, env
and agent read from its config.json when there is one. Multi-seed runs
(`--num-seeds N`, records with `<key>_per_seed` lists) are drawn as the mean over
seeds with a shaded min-max band. A curve with fewer than 60 points has a marker at
each point; one with fewer than 2 (a run shorter than its logging interval) gets a warning on
stderr. The legend sits below the axes. A directory without metrics.jsonl is an error
(exit code 2, naming the path).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

RETURN_KEYS = (("episode_return", "episode return", "-", "s"), ("eval_return", "eval return (greedy)", "--", "o"))
"""(metrics key, legend suffix, line style, marker)."""

FIGURES = ("return_vs_steps.png", "return_vs_wall_time.png", "sps_vs_steps.png")


class PlotError(Exception):
    """A user error (bad path, unreadable metrics) reported with exit code 2."""


class Run(NamedTuple):
    path: Path
    label: str
    records: list[dict[str, Any]]


class Series(NamedTuple):
    x: list[float]
    mean: list[float]
    low: list[float] | None  # min over seeds (multi-seed runs only)
    high: list[float] | None


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of `path/metrics.jsonl`; a half-written last line is skipped."""
    metrics = path / "metrics.jsonl"
    if not path.is_dir():
        raise PlotError(f"{path}: no such directory" if not path.exists() else f"{path}: not a directory")
    if not metrics.is_file():
        raise PlotError(f"{path}: no metrics.jsonl in this directory (is it a podrl run directory?)")
    lines = [line for line in metrics.read_text().splitlines() if line.strip()]
    records = []
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:  # a run still writing
                break
            raise PlotError(f"{metrics}: line {i + 1} is not JSON ({e})") from None
    if not records:
        raise PlotError(f"{metrics}: no records")
    return records


def run_label(path: Path, qualified: bool = False) -> str:
    """`<dir name> (<layout>, <env>, <agent>)` from config.json where present
    (`<parent>/<dir name>` when `qualified`, for runs whose names collide)."""
    resolved = path.resolve()
    name = f"{resolved.parent.name}/{resolved.name}" if qualified else resolved.name
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return name
    run, agent = config.get("run", {}), config.get("agent", {})
    parts = []
    if isinstance(run, dict):
        if "num_seeds" in run:
            parts.append("anakin" + (f", {run['num_seeds']} seeds" if run.get("num_seeds", 1) > 1 else ""))
        elif "actor_devices" in run:
            parts.append("sebulba")
        if run.get("env"):
            parts.append(str(run["env"]))
    if isinstance(agent, dict):
        if "clip_eps" in agent:
            parts.append("PPO")
        elif "vtrace_lambda" in agent:
            parts.append("IMPALA")
    return f"{name} ({', '.join(parts)})" if parts else name


def series(records: list[dict[str, Any]], x_key: str, y_key: str) -> Series | None:
    """The records that have a finite `y_key`, with a min-max band from `<y_key>_per_seed`."""
    xs, means, lows, highs, banded = [], [], [], [], False
    for r in records:
        x, y = _number(r.get(x_key)), _number(r.get(y_key))
        per_seed = [_number(v) for v in r.get(y_key + "_per_seed") or []]
        finite = [v for v in per_seed if math.isfinite(v)]
        if not math.isfinite(y) and finite:
            y = sum(finite) / len(finite)
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        xs.append(x)
        means.append(y)
        banded = banded or len(per_seed) > 1
        lows.append(min(finite) if finite else y)
        highs.append(max(finite) if finite else y)
    if not xs:
        return None
    return Series(xs, means, lows if banded else None, highs if banded else None)


MARKER_BELOW = 60
"""A curve with fewer points than this is drawn with a marker at each point (a single point stays visible)."""


def draw(ax, s: Series, color, label: str, linestyle: str = "-", marker: str | None = "o") -> None:
    """`s` as a line (markers when it has fewer than MARKER_BELOW points) with its min-max band, if any."""
    shown = marker if len(s.x) < MARKER_BELOW else None
    ax.plot(s.x, s.mean, color=color, linestyle=linestyle, marker=shown, markersize=4, label=label)
    if s.low is not None:
        ax.fill_between(s.x, s.low, s.high, color=color, alpha=0.2, linewidth=0)


def curve_label(s: Series, label: str) -> str:
    """`label` plus what is drawn: the mean over seeds with a min-max band, or one seed's values."""
    return label + (" (mean, min-max over seeds)" if s.low is not None else "")


def warn_if_short(s: Series, what: str) -> None:
    """A warning on stderr when `s` has fewer than 2 points (the curve is a single marker, no line)."""
    if len(s.x) < 2:
        print(f"warning: {what}: {len(s.x)} point(s) to draw, so no line (a run shorter than its "
              "logging interval?); drawn as a marker", file=sys.stderr)


def figure(runs: list[Run], x_key: str, y_specs, xlabel: str, ylabel: str, title: str, path: Path) -> None:
    """One figure: every run, every (key, suffix, style, marker) in `y_specs`."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = 0
    for i, run in enumerate(runs):
        for key, suffix, style, marker in y_specs:
            s = series(run.records, x_key, key)
            if s is None:
                continue
            label = run.label if len(y_specs) == 1 else f"{run.label}: {suffix}"
            warn_if_short(s, f"{run.path}: {key} vs {x_key}")
            draw(ax, s, colors[i % len(colors)], curve_label(s, label), style, marker)
            drawn += 1
    if not drawn:
        ax.text(0.5, 0.5, "no data for this plot in the given runs", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if drawn:  # below the axes, so it covers no data and leaves the y-label in place
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1 if drawn > 3 else drawn,
                  frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def member_series(records: list[dict[str, Any]], key: str) -> tuple[list[float], list[list[float]]]:
    """(steps, per-member values `[member][step]`) of `<key>_per_seed` (NaN where missing)."""
    rows = [r for r in records if isinstance(r.get(key + "_per_seed"), list)]
    steps = [_number(r.get("step")) for r in rows]
    width = max((len(r[key + "_per_seed"]) for r in rows), default=0)
    values = [[_number(r[key + "_per_seed"][i]) if i < len(r[key + "_per_seed"]) else math.nan for r in rows]
              for i in range(width)]
    return steps, values


def population_figure(run: Run, path: Path) -> bool:
    """Members' returns and hyperparameters, with PBT lineage; False (nothing written) if not a population run."""
    import matplotlib.pyplot as plt

    fields = sorted({k[3:-9] for r in run.records for k in r if k.startswith("hp/") and k.endswith("_per_seed")})
    if not fields:
        return False
    fig, axes = plt.subplots(len(fields) + 1, 1, figsize=(8, 3 * (len(fields) + 1)), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, key, label in zip(axes, ["episode_return"] + [f"hp/{f}" for f in fields],
                              ["episode return"] + fields):
        steps, members = member_series(run.records, key)
        for i, values in enumerate(members):
            ax.plot(steps, values, color=colors[i % len(colors)], linewidth=1.2, label=f"member {i}")
        if key != "episode_return":
            _draw_lineage(ax, run.records, key[3:])
            finite = [v for vs in members for v in vs if math.isfinite(v) and v > 0]
            if finite and all(v > 0 for vs in members for v in vs if math.isfinite(v)) and \
                    max(finite) > 10 * min(finite):
                ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_title(f"Population: {run.label}", fontsize=9)
    if len(member_series(run.records, "episode_return")[1]) <= 16:
        axes[0].legend(fontsize=7, ncol=4)
    axes[-1].set_xlabel("env steps")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _draw_lineage(ax, records: list[dict[str, Any]], field: str) -> None:
    """At each PBT record: a grey line from the parent's value to the child's new value."""
    for r in records:
        parents, before, after = r.get("pbt/parent"), r.get(f"hp/{field}_per_seed"), r.get(f"pbt/hp/{field}")
        if not (isinstance(parents, list) and isinstance(before, list) and isinstance(after, list)):
            continue
        x = _number(r.get("step"))
        for child, parent in enumerate(parents):
            if parent != child:
                ax.plot([x, x], [_number(before[parent]), _number(after[child])], color="grey",
                        linestyle=":", linewidth=1)
                ax.plot([x], [_number(after[child])], marker="o", color="grey", markersize=3)


def plot_runs(runs: list[Run], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in FIGURES]
    figure(runs, "step", RETURN_KEYS, "env steps", "return", "Return vs env steps", paths[0])
    figure(runs, "wall_time", RETURN_KEYS, "wall time (s since the run started)", "return",
           "Return vs wall time", paths[1])
    figure(runs, "step", (("sps", "SPS", "-", "o"),), "env steps", "env steps / s", "Throughput", paths[2])
    for run in runs:
        path = out / f"population_{run.path.resolve().name}.png"
        if population_figure(run, path):
            paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", type=Path, help="run directories (each with a metrics.jsonl)")
    parser.add_argument("--out", type=Path, default=Path("plots"), help="folder for the PNG files (default: plots)")
    args = parser.parse_args(argv)
    try:
        names = [path.resolve().name for path in args.run_dirs]
        runs = [Run(path, run_label(path, names.count(path.resolve().name) > 1), read_records(path))
                for path in args.run_dirs]
    except PlotError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path in plot_runs(runs, args.out):
        print(os.fspath(path))
    return 0
