"""The benchmark to run on one GPU, in at most 8 minutes: every step, one table.

Steps (each an existing benchmark script in its own process, JAX_PLATFORMS=cuda, with a
wall-clock budget; the budgets sum to <= 480 s, and a step past its budget is stopped and
reported as such):

  anakin_cartpole  bench_peers.py --rows gpu: Anakin PPO CartPole-v1 at 4,096 x 16 and
                   65,536 x 16 envs vs rejax 0.1.3 (its venv: `bench_peers.py --setup-peer`,
                   with a CUDA jaxlib on a GPU machine; without it the rejax cells say
                   "not measured")
  anakin_minatar   bench_minatar.py --devices 1 --envs 1024 4096: Anakin PPO (MinAtar CNN) on
                   Breakout-MinAtar vs the env-only ceiling
  sebulba_pong     bench_sebulba.py --envs ale:Pong --threads 1 2 4: Sebulba PPO with the Nature
                   CNN (actor and learner on the one GPU), 16 envs per thread, vs the env-only
                   ceiling of the same threads and envs

It prints one markdown table (and `--out` writes it as JSON with every step's document):
step, config, podrl steps/s, the reference (peer or ceiling), its steps/s, and the ratio.

    python scripts/bench_gpu.py --out gpu.json          # on the GPU machine
    python scripts/bench_gpu.py --dry-run               # anywhere: the plan, each step's flags checked
                                                        # by that script's own parser; nothing runs
    python scripts/bench_gpu.py --steps anakin_minatar sebulba_pong   # some steps only
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench_common import fmt, new_parser, utc_timestamp

HERE = Path(__file__).resolve().parent
TOTAL_BUDGET_S = 480


@dataclasses.dataclass(frozen=True)
class Step:
    """One benchmark script run: its flags, its budget and how its JSON becomes table rows."""

    name: str
    script: str
    flags: tuple[str, ...]
    budget_s: int


STEPS = (
    Step("anakin_cartpole", "bench_peers.py", ("--rows", "gpu", "--repeats", "1", "--timeout", "80"), 190),
    Step("anakin_minatar", "bench_minatar.py", ("--devices", "1", "--envs", "1024", "4096", "--timeout", "100"), 110),
    Step("sebulba_pong", "bench_sebulba.py", ("--envs", "ale:Pong", "--threads", "1", "2", "4", "--num-envs", "16",
                                              "--updates", "12", "--ceiling-seconds", "3", "--timeout", "55"), 180),
)


def parser_of(script: str) -> Callable[[list[str]], Any]:
    """The `parse_args(argv)` of a benchmark script (each has one)."""
    sys.path.insert(0, str(HERE))
    module = __import__(Path(script).stem)
    return module.parse_args


def check_plan(steps: tuple[Step, ...]) -> list[str]:
    """Problems of the plan: budgets over TOTAL_BUDGET_S, flags a step's script refuses."""
    problems = []
    total = sum(s.budget_s for s in steps)
    if total > TOTAL_BUDGET_S:
        problems.append(f"budgets sum to {total} s > {TOTAL_BUDGET_S} s")
    for step in steps:
        try:
            parser_of(step.script)([*step.flags, "--out", os.devnull])
        except SystemExit as e:
            problems.append(f"{step.name}: {step.script} refuses {' '.join(step.flags)} (exit {e.code})")
    return problems


def run_step(step: Step, out_dir: Path) -> dict[str, Any]:
    """Runs `step` on the GPU within its budget; its JSON document, or an error."""
    out = out_dir / f"{step.name}.json"
    cmd = [sys.executable, str(HERE / step.script), *step.flags, "--out", str(out)]
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cuda")}
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=step.budget_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"past its {step.budget_s} s budget", "seconds": time.perf_counter() - start}
    seconds = time.perf_counter() - start
    if not out.exists():
        return {"error": f"exit {proc.returncode}: " + "\n".join(proc.stderr.strip().splitlines()[-5:]),
                "seconds": seconds}
    return {"document": json.loads(out.read_text()), "seconds": seconds, "exit_code": proc.returncode}


def table_rows(name: str, doc: dict[str, Any]) -> list[tuple[str, str, float | None, str, float | None]]:
    """(step, config, podrl steps/s, reference, reference steps/s) of one step's document."""
    if name == "anakin_cartpole":
        return [(name, r["name"], r["podrl"]["steps_per_second"], "rejax", r["rejax"]["steps_per_second"])
                for r in doc["rows"]]
    if name == "anakin_minatar":
        return [(name, f"{r['num_envs']} x {r['rollout_length']}", r["ppo_steps_per_second"], "env-only",
                 r["env_only_steps_per_second"]) for r in doc["table"]]
    return [(name, f"{r['threads']} thread(s) x {r['envs_per_thread']}", r["steps_per_second"], "env-only",
             r["ceiling_steps_per_second"]) for r in doc["rows"]]


def markdown(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| step | config | podrl steps/s | reference | reference steps/s | podrl / reference |",
             "|---|---|---:|---|---:|---:|"]
    for name, result in results.items():
        if "error" in result:
            lines.append(f"| {name} | FAILED: {result['error'].splitlines()[0]} | | | | |")
            continue
        for step, config, ours, ref_name, ref in table_rows(name, result["document"]):
            ratio = ours / ref if ours and ref else None
            lines.append(f"| {step} | {config} | {fmt(ours, ',.0f')} | {ref_name} | {fmt(ref, ',.0f')} | "
                         f"{fmt(ratio, '.2f')} |")
    seconds = sum(r["seconds"] for r in results.values())
    return "\n".join(lines) + f"\n\nSteps run: {seconds:.0f} s of wall time (budget {TOTAL_BUDGET_S} s)."


def main(argv: list[str] | None = None) -> int:
    parser = new_parser(__doc__)
    parser.add_argument("--dry-run", action="store_true", help="print the plan and check each step's flags; run nothing")
    parser.add_argument("--out", help="write the JSON document here")
    parser.add_argument("--steps", nargs="+", choices=[s.name for s in STEPS], default=[s.name for s in STEPS],
                        help="run only these steps (a lease too short for all of them)")
    args = parser.parse_args(argv)
    steps = tuple(s for s in STEPS if s.name in args.steps)
    problems = check_plan(steps)
    for step in steps:
        print(f"{step.name:16s} budget {step.budget_s:3d} s: python scripts/{step.script} {' '.join(step.flags)}")
    print(f"total budget {sum(s.budget_s for s in steps)} s of {TOTAL_BUDGET_S} s")
    for problem in problems:
        print(f"PLAN PROBLEM: {problem}", file=sys.stderr)
    if args.dry_run or problems:
        return 1 if problems else 0
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for step in steps:
            results[step.name] = run_step(step, Path(tmp))
            print(f"{step.name}: {results[step.name].get('error', 'done')} in {results[step.name]['seconds']:.0f} s",
                  file=sys.stderr, flush=True)
    print(markdown(results), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"benchmark": "bench_gpu", "timestamp": utc_timestamp(), "steps": results}, f, indent=2)
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
