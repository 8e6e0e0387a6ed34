"""`podrl population-summary`: the numbers and sentences of a population report (PBT vs no PBT),
written from the runs' records.

    podrl population-summary docs/results/pbt-acrobot/metrics-pbt.jsonl \
        docs/results/pbt-acrobot/metrics-no-pbt.jsonl --labels PBT "no PBT" --field learning_rate \
        --readme docs/results/pbt-acrobot/README.md

Prints the markdown (the greedy-eval table per evaluation step, each run's exploit steps and
copies, its first and final values of `--field`, and its worst members at the end by training
return and by greedy eval); with `--readme`, it replaces the text between the lines
`<!-- population_summary: begin -->` and `<!-- population_summary: end -->` of that file, so no
figure there is typed by hand. A record is a line of a run's metrics.jsonl (`step`,
`<key>_per_seed` lists over members, `pbt/parent` at an exploit step).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

BEGIN, END = "<!-- population_summary: begin -->", "<!-- population_summary: end -->"


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def per_member(records: list[dict[str, Any]], key: str) -> list[tuple[int, list[float]]]:
    """(step, `[member]` values) of every record whose `<key>_per_seed` has a finite value."""
    rows = []
    for r in records:
        values = [math.nan if v is None else float(v) for v in r.get(key + "_per_seed") or []]
        if any(math.isfinite(v) for v in values):
            rows.append((int(r["step"]), values))
    return rows


def copies(records: list[dict[str, Any]]) -> tuple[int, int]:
    """(exploit steps, members replaced by a copy of another) over the `pbt/parent` records."""
    parents = [r["pbt/parent"] for r in records if isinstance(r.get("pbt/parent"), list)]
    return len(parents), sum(p != child for row in parents for child, p in enumerate(row))


def worst(values: list[float], count: int) -> list[int]:
    """The `count` members with the lowest finite values, worst first."""
    return sorted((i for i, v in enumerate(values) if math.isfinite(v)), key=lambda i: values[i])[:count]


def sci(value: float, digits: int) -> str:
    """`value` with `digits` significant digits in short scientific form: 3.147e-3."""
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def spread(values: list[float]) -> str:
    """`median / worst / best` of the finite values."""
    finite = [v for v in values if math.isfinite(v)]
    return f"{statistics.median(finite):.1f} / {min(finite):.1f} / {max(finite):.1f}" if finite else "n/a"


def eval_table(runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Greedy eval per evaluation step (rows) and run (columns): median / worst / best member."""
    evals = {label: dict(per_member(records, "eval_return")) for label, records in runs.items()}
    steps = sorted({s for rows in evals.values() for s in rows})
    lines = ["| env steps per member | " + " | ".join(runs) + " |", "|---:|" + "---|" * len(runs)]
    for step in steps:
        cells = [spread(rows[step]) if step in rows else "n/a" for rows in evals.values()]
        lines.append(f"| {step:,} | " + " | ".join(cells) + " |")
    return lines


def run_sentences(label: str, records: list[dict[str, Any]], field: str, count: int = 2) -> str:
    """What one run did: its time and SPS, its copies, its `field` at the start and end (2 and 4
    significant digits), its worst members at the end by training return and by greedy eval."""
    hp = per_member(records, f"hp/{field}")
    first, last = hp[0][1], hp[-1][1]
    steps, copied = copies(records)
    sps = statistics.median(float(r["sps"]) for r in records if isinstance(r.get("sps"), (int, float)))
    said = (f"{label}: {records[-1]['wall_time']:.0f} s from the logger's start to the last record, "
            f"{sps:,.0f} env steps/s over all members (median of the logged windows); {steps} exploit steps, "
            f"{copied} copies; {field} first " + ", ".join(sci(v, 2) for v in first)
            + "; final " + ", ".join(sci(v, 4) for v in last) + ".")
    for key, name in (("episode_return", "training return"), ("eval_return", "greedy eval")):
        step, values = per_member(records, key)[-1]
        members = ", ".join(f"member {i} ({values[i]:.1f}; started at {field} {sci(first[i], 2)})"
                            for i in worst(values, count))
        said += f" Worst by {name} at {step:,} steps: {members}."
    return said


def summary(runs: dict[str, list[dict[str, Any]]], field: str) -> str:
    """The generated block: the eval table, then one paragraph per run."""
    lines = ["Greedy evaluation (median / worst / best member):", ""] + eval_table(runs)
    for label, records in runs.items():
        lines += ["", run_sentences(label, records, field)]
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """`text` with the lines between BEGIN and END replaced by `block`; ValueError when they are missing."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"the README has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n" + block + "\n" + END + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("metrics", nargs="+", type=Path, help="metrics.jsonl of each run")
    parser.add_argument("--labels", nargs="+", help="a column label per run (default: the file names)")
    parser.add_argument("--field", default="learning_rate", help="the swept hyperparameter to report")
    parser.add_argument("--readme", type=Path, help="rewrite the generated block of this README")
    args = parser.parse_args(argv)
    labels = args.labels or [p.stem for p in args.metrics]
    if len(labels) != len(args.metrics):
        parser.error("--labels needs one label per metrics file")
    block = summary({label: load(path) for label, path in zip(labels, args.metrics)}, args.field)
    if args.readme is None:
        print(block)
        return 0
    args.readme.write_text(replace_block(args.readme.read_text(), block))
    print(f"rewrote the generated block of {args.readme}")
    return 0
