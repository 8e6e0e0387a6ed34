"""The numbers and the text of a reproduction report: pure functions of run records.

`podrl reproduce` (`podrl.reports.reproduce`) runs the training and calls these; a record is one line of a run's
metrics.jsonl (`step`, `sps`, `episode_return[_per_seed]`, `eval_return[_per_seed]`, ...).
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from typing import Any, NamedTuple

from podrl.cli import presets
from podrl.reports.aggregate import aggregate_lines
from podrl.reports.plot import Series, curve_label, draw, warn_if_short

FINAL_FRACTION = 0.1
"""The final return is the mean episode return over this last fraction of the logged records."""


DEFINITIONS = (
    f"Final return: the mean episode return over the last {FINAL_FRACTION:.0%} of the records that logged one, "
    "per seed; the table gives the mean over seeds and [min, max]. Greedy eval: the last evaluation of the greedy "
    "policy; for a run stopped before its own, `podrl evaluate` on its last checkpoint (the command is "
    "below). Wall time counts process start to exit, compile included. SPS: the median over the run's records "
    "of the env steps per second of each logging window (an Anakin program's seeds together; the mean of the "
    "seeds' runs for Sebulba, one process per seed); each training command's closing line in `train.log` "
    "gives its own average instead (its env steps over its training seconds).")
"""What the report's columns mean."""


class EnvResult(NamedTuple):
    """What one env's runs gave (per seed where a list)."""

    env: str
    seeds: int
    steps: int
    final_return: list[float]  # per seed: mean episode return over the last FINAL_FRACTION of its records with one
    eval_return: list[float]  # per seed: the last greedy evaluation (nan if none)
    wall_s: float  # all of this env's runs, process start to exit (compile included)
    sps: float  # median logged SPS
    commands: list[str]


def flag_value(command: list[str], flag: str) -> str | None:
    """The value after `flag` in `command` (its last occurrence), or None."""
    at = [i for i, word in enumerate(command) if word == flag]
    return command[at[-1] + 1] if at and at[-1] + 1 < len(command) else None


def is_evaluation(command: str | list[str]) -> bool:
    """Whether a report's command evaluates a checkpoint (`podrl evaluate`, or an older report's
    `python scripts/evaluate.py`) rather than training."""
    words = shlex.split(command) if isinstance(command, str) else command
    return "scripts/evaluate.py" in words or words[:2] == ["podrl", "evaluate"]


def asked_steps(commands: list[str], default: int | None) -> int | None:
    """The env steps the last training command in `commands` asked for (`--total-steps`), else `default`."""
    for command in reversed(commands):
        words = shlex.split(command)
        if not is_evaluation(words) and (steps := flag_value(words, "--total-steps")) is not None:
            return int(steps)
    return default


def slug(env: str) -> str:
    """A file-name-safe form of an env id: `gymnax:Breakout-MinAtar` -> `gymnax-Breakout-MinAtar`."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", env).strip("-")


def per_seed(records: list[dict[str, Any]], key: str) -> list[list[float]]:
    """`[record][seed]` values of `key` (the `_per_seed` list, or the value itself for one seed)."""
    rows = []
    for r in records:
        values = r.get(key + "_per_seed")
        if values is None and key in r:
            values = [r[key]]
        rows.append([float(v) if v is not None else math.nan for v in values] if values is not None else [])
    return rows


def merge_seed_runs(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One record list with `<key>_per_seed` lists from one-seed runs logged at the same steps."""
    length = min(len(r) for r in runs)
    merged = []
    for i in range(length):
        rows = [r[i] for r in runs]
        record = {"step": rows[0]["step"], "wall_time": max(r.get("wall_time", math.nan) for r in rows),
                  "sps": sum(r.get("sps", 0.0) for r in rows) / len(rows)}
        for key in ("episode_return", "eval_return"):
            values = [r.get(key, math.nan) for r in rows]
            record[key + "_per_seed"] = values
            finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
            record[key] = sum(finite) / len(finite) if finite else math.nan
        merged.append(record)
    return merged


def summarize(env: str, records: list[dict[str, Any]], seeds: int, wall_s: float, commands: list[str]) -> EnvResult:
    """The table row of one env from its (merged) records."""
    # A record where a seed ended no episode (e.g. the last, partial call of a run with long
    # episodes) logs no return for it: each seed's final return is over its own logged returns.
    rows = [row for row in per_seed(records, "episode_return") if row]
    final = [_tail_mean([row[s] for row in rows if math.isfinite(row[s])]) for s in range(len(rows[0]))] if rows else []
    evals = [row for row in per_seed(records, "eval_return") if row and any(math.isfinite(v) for v in row)]
    sps = sorted(float(r["sps"]) for r in records if isinstance(r.get("sps"), (int, float)))
    return EnvResult(env, seeds, int(records[-1]["step"]), final, evals[-1] if evals else [math.nan] * seeds,
                     wall_s, sps[len(sps) // 2] if sps else math.nan, commands)


def _tail_mean(values: list[float]) -> float:
    """The mean of the last FINAL_FRACTION of `values` (at least one); nan for none."""
    tail = values[-max(1, int(len(values) * FINAL_FRACTION)):]
    return sum(tail) / len(tail) if tail else math.nan


def spread(values: list[float]) -> str:
    """`mean [min, max]` of finite values, or n/a."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "n/a"
    mean = sum(finite) / len(finite)
    return f"{mean:.1f} [{min(finite):.1f}, {max(finite):.1f}]" if len(finite) > 1 else f"{mean:.1f}"


def plot_env(result: EnvResult, curve: Series, anchor: presets.Anchor | None, path: Path) -> None:
    """The learning curve PNG: mean over seeds with a min-max band (one seed: its values), markers on a
    short curve, the anchor as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    warn_if_short(curve, f"{result.env}: learning curve")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    seeds = f"{result.seeds} seeds" if result.seeds > 1 else "1 seed"
    draw(ax, curve, "C0", curve_label(curve, f"podrl, {seeds}"))
    if anchor is not None:
        ax.axhline(anchor.value, color="C3", linestyle="--", label=f"published: {anchor.value:g}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(result.env, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def aggregate(preset: presets.Preset, results: list[EnvResult]) -> list[str]:
    """The IQM / optimality-gap lines of a multi-seed report over the envs with a published return
    (none for one seed: a bootstrap over one run says nothing)."""
    scored = scored_results(preset, results)
    return [""] + aggregate_table(scored, [preset.anchors[r.env].value for r in scored]) if scored else []


def scored_results(preset: presets.Preset, results: list[EnvResult]) -> list[EnvResult]:
    """The results an aggregate is over: more than one seed, and a published return of `preset`."""
    return [r for r in results if r.seeds > 1 and r.env in preset.anchors]


def aggregate_table(results: list[EnvResult], published: list[float]) -> list[str]:
    """The aggregate lines (`podrl.reports.aggregate.aggregate_lines`) of `results`' final returns and
    greedy evals, each env's scores divided by its `published` return."""
    rows = {"final return": [r.final_return for r in results], "greedy eval": [r.eval_return for r in results]}
    return aggregate_lines(rows, published, [r.env for r in results])


def report(preset: presets.Preset, results: list[EnvResult], invocation: dict[str, Any],
           rebuilt: str | None = None) -> str:
    """The markdown report of `invocation` (see `invocation_of`); `rebuilt`: the date of a `--report-only`.

    `invocation["notes"]` (optional, written into results.json by hand): paragraphs printed under the
    table, for what the records cannot say (e.g. a figure measured outside the run)."""
    made = f"Made by `podrl reproduce {shlex.join(invocation['argv'])}` on {invocation['date']}"
    for later in invocation.get("continued", []):
        elsewhere = f" ({later['machine']})" if later["machine"] != invocation["machine"] else ""
        made += (f"; continued from its checkpoints by `podrl reproduce {shlex.join(later['argv'])}` "
                 f"on {later['date']}{elsewhere}")
    made += f"; report rebuilt from its results by `--report-only` on {rebuilt}." if rebuilt else "."
    lines = [
        f"# {preset.name}: {preset.summary}", "",
        f"Hyperparameters: {preset.source}.", "",
        made, "",
        f"Machine: {invocation['machine']}.", "",
        DEFINITIONS, "",
        "| env | seeds | env steps | final return | greedy eval | published | wall time | SPS |",
        "|---|---:|---:|---|---|---:|---:|---:|",
    ]
    for r in results:
        anchor = preset.anchors.get(r.env)
        published = f"{anchor.value:g}" if anchor else "n/a"
        lines.append(f"| {r.env} | {r.seeds} | {r.steps:,} | {spread(r.final_return)} | {spread(r.eval_return)} | "
                     f"{published} | {r.wall_s / 60:.1f} min | {r.sps:,.0f} |")
    lines += [line for note in invocation.get("notes", []) for line in ("", note)]
    sources = sorted({preset.anchors[r.env].source for r in results if r.env in preset.anchors})
    if sources:
        lines += ["", "Published figures: " + "; ".join(sources) + "."]
    lines += aggregate(preset, results)
    budget = preset.run.get("total_steps")
    short = [r for r in results if budget and r.steps < 0.99 * budget]  # not the budget floored to whole updates
    if short:
        lines += ["", f"Budget: the preset's (and the published figures') budget is {budget:,} env steps per seed; "
                      f"these runs took {short[0].steps:,} ({short[0].steps / budget:.0%}), so their returns are "
                      "an early point of the published curve, not a reproduction of its final figure."]
    budgets = [i.get("stop_after_s") for i in [invocation] + invocation.get("continued", [])]
    if any(budgets):
        said = ", then ".join(f"{b:g} s" if b else "no limit" for b in budgets)
        cut = [r.env for r in results if (asked := asked_steps(r.commands, budget)) and r.steps < 0.99 * asked]
        outcome = (f"the budget cut short the runs of {', '.join(cut)}: their env steps above are what it allowed, "
                   "not the total the commands below asked for" if cut else
                   "every run reached the total its command asked for (`--total-steps`) within it")
        lines += ["", f"The runs had wall-clock budgets (`--stop-after-s`: {said}; a run out of time checkpoints and "
                      f"stops); {outcome}."]
    stretched = [later["argv"][later["argv"].index("--total-steps") + 1] for later in invocation.get("continued", [])
                 if "--total-steps" in later["argv"][:-1]]
    if stretched:
        lines += ["", f"Continued to a new total (`--total-steps {stretched[-1]}`): from the resumed update on, "
                      "a schedule over the whole budget follows the new total, so a learning rate annealed "
                      "towards the old total steps up at the resume."]
    lines += [""] + [f"![{r.env}]({slug(r.env)}.png)" for r in results]
    lines += ["", "Commands run (from the repository root):", "", "```bash"]
    lines += [c for r in results for c in r.commands] + ["```", ""]
    return "\n".join(lines)
