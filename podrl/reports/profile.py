"""`podrl profile-summary`: where a training call spends its time, a summary of a `--profile DIR` trace.

XLA:CPU records every thunk it runs (a fusion, a copy, a dot, a collective) and every
loop around them. This command charges each thunk to its enclosing loops, named by the
source line that made them (from the compiled program `--profile` writes beside the
trace in Anakin; Sebulba traces show the loops' HLO names), and prints markdown tables:
thunks per loop nest, per op kind, per thread, and the collectives.

    podrl anakin --num-envs 4 --rollout-length 128 --total-steps 100000 --updates-per-call 4 \\
        --profile /tmp/podrl-trace
    podrl profile-summary /tmp/podrl-trace [--json summary.json]

On small programs the thunk count, not the arithmetic, sets the speed: compare counts
between programs; the durations carry the tracer's own cost per event.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from podrl.run.profiling import PROGRAM_TEXT, find_trace, summarize_trace, summary_markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", help="the --profile folder")
    parser.add_argument("--top", type=int, default=12, help="rows per table (default 12)")
    parser.add_argument("--within", default=None,
                        help="only thunks inside loops whose label has this (e.g. rollout.py)")
    parser.add_argument("--json", default=None, help="also write the summary here as JSON")
    args = parser.parse_args(argv)
    try:
        trace = find_trace(args.directory)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    program = os.path.join(args.directory, PROGRAM_TEXT)
    hlo_text = Path(program).read_text() if os.path.exists(program) else None
    summary = summarize_trace(trace, hlo_text, top=args.top, within=args.within)
    print(summary_markdown(summary))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0
