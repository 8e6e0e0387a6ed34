"""The benchmark to run on one GPU, in at most 8 minutes: every step, one table.

Steps (each an existing benchmark in its own process, JAX_PLATFORMS=cuda, with a wall-clock
budget; the budgets sum to <= 480 s, and a step past its budget is stopped and reported as such):

  anakin_cartpole  benchmarks.peer_ppo --rows gpu: Anakin PPO CartPole-v1 at 4,096 x 16 and
                   65,536 x 16 envs vs rejax 0.1.3 (its venv: `benchmarks.peer_ppo --setup-peer`,
                   with a CUDA jaxlib on a GPU machine; without it the rejax cells say
                   "not measured")
  anakin_minatar   benchmarks.minatar --devices 1 --envs 1024 4096: Anakin PPO (MinAtar CNN) on
                   Breakout-MinAtar vs the env-only ceiling
  sebulba_pong     benchmarks.sebulba --envs ale:Pong --threads 1 2 4: Sebulba PPO with the Nature
                   CNN (actor and learner on the one GPU), 16 envs per thread, vs the env-only
                   ceiling of the same threads and envs

Those three are the default plan. One more step makes a plan of its own (issue 39: the Sebulba
actor loop at its env ceiling), run with `--steps sebulba_actors`:

  sebulba_actors   benchmarks.sebulba --envs ale:Pong --threads 1 2 4 8 --env-groups 1 2: the same
                   Sebulba PPO at 1, 2, 4 and 8 actor threads of 16 envs, each with one env group
                   (the classic loop: act, then step) and with two groups that alternate (one
                   group's envs step while the other's inference runs), vs the env-only ceiling,
                   with the CPU cores each run kept busy

It prints one markdown table (and `--out` writes it as JSON with every step's document):
step, config, podrl steps/s, the reference (peer or ceiling), its steps/s, the ratio, and the
host cores podrl's run and the reference kept busy (Sebulba steps; CPU seconds per second).

    python -m benchmarks.gpu --out gpu.json          # on the GPU machine
    python -m benchmarks.gpu --dry-run               # anywhere: the plan, each step's flags checked
                                                     # by that benchmark's own parser; nothing runs
    python -m benchmarks.gpu --steps anakin_minatar sebulba_pong   # some steps only
    python -m benchmarks.gpu --steps sebulba_actors --out actors.json   # the actor-loop plan
    python -m benchmarks.gpu --quick                 # every step with --quick (smoke test)

Any selection of steps must fit the 480 s budget.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks.harness import ROOT, finish, fmt, new_parser, table

TOTAL_BUDGET_S = 480


@dataclasses.dataclass(frozen=True)
class Step:
    """One benchmark run: its module, its flags, its budget."""

    name: str
    module: str  # benchmarks.<module>
    flags: tuple[str, ...]
    budget_s: int

    @property
    def command(self) -> str:
        return f"python -m benchmarks.{self.module} {' '.join(self.flags)}"


STEPS = (
    Step("anakin_cartpole", "peer_ppo", ("--rows", "gpu", "--repeats", "1", "--timeout", "80"), 190),
    Step("anakin_minatar", "minatar", ("--devices", "1", "--envs", "1024", "4096", "--timeout", "100"), 110),
    Step("sebulba_pong", "sebulba", ("--envs", "ale:Pong", "--threads", "1", "2", "4", "--num-envs", "16",
                                     "--updates", "12", "--ceiling-seconds", "3", "--timeout", "55"), 180),
)
"""The default plan."""

ACTOR_STEPS = (
    Step("sebulba_actors", "sebulba", ("--envs", "ale:Pong", "--threads", "1", "2", "4", "8", "--num-envs", "16",
                                       "--env-groups", "1", "2", "--updates", "8", "--ceiling-seconds", "3",
                                       "--timeout", "60"), 420),
)
"""The actor-loop plan (`--steps sebulba_actors`): it and the default plan do not fit one budget together."""


def parser_of(module: str) -> Callable[[list[str]], Any]:
    """The `parse_args(argv)` of benchmarks.<module> (each benchmark that runs as a step has one)."""
    return importlib.import_module(f"benchmarks.{module}").parse_args


def check_plan(steps: tuple[Step, ...]) -> list[str]:
    """Problems of the plan: budgets over TOTAL_BUDGET_S, flags a step's script refuses."""
    problems = []
    total = sum(s.budget_s for s in steps)
    if total > TOTAL_BUDGET_S:
        problems.append(f"budgets sum to {total} s > {TOTAL_BUDGET_S} s")
    for step in steps:
        try:
            parser_of(step.module)([*step.flags, "--out", os.devnull])
        except SystemExit as e:
            problems.append(f"{step.name}: benchmarks.{step.module} refuses {' '.join(step.flags)} (exit {e.code})")
    return problems


def run_step(step: Step, out_dir: Path, quick: bool) -> dict[str, Any]:
    """Runs `step` on the GPU within its budget (with --quick when `quick`); its JSON document, or an error."""
    out = out_dir / f"{step.name}.json"
    cmd = [sys.executable, "-m", f"benchmarks.{step.module}", *step.flags, *(["--quick"] if quick else []),
           "--out", str(out)]
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cuda")}
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=step.budget_s, env=env, cwd=ROOT)
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
    return [(name, f"{r['threads']} thread(s) x {r['envs_per_thread']}, {r.get('env_groups', 1)} group(s)",
             r["steps_per_second"], "env-only", r["ceiling_steps_per_second"]) for r in doc["rows"]]


def cores_of(name: str, doc: dict[str, Any]) -> list[tuple[float | None, float | None]]:
    """(podrl's, the reference's) host cores kept busy, per row of a Sebulba step's document; Nones elsewhere."""
    if name.startswith("sebulba"):
        return [(r.get("cpu_cores_used"), r.get("ceiling_cpu_cores_used")) for r in doc["rows"]]
    return [(None, None)] * len(table_rows(name, doc))


def summary_rows(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the table: step, config, podrl and reference steps/s and their ratio; a failed
    step's row has its `error`."""
    rows = []
    for name, result in results.items():
        if "error" in result:
            rows.append({"step": name, "error": result["error"]})
            continue
        cores = cores_of(name, result["document"])
        for (step, config, ours, ref_name, ref), (own, ref_cores) in zip(table_rows(name, result["document"]), cores):
            rows.append({"step": step, "config": config, "podrl_steps_per_second": ours, "reference": ref_name,
                         "reference_steps_per_second": ref, "ratio": ours / ref if ours and ref else None,
                         "podrl_cores": own, "reference_cores": ref_cores})
    return rows


def markdown(rows: list[dict[str, Any]], results: dict[str, dict[str, Any]]) -> str:
    def cells(r: dict[str, Any]) -> list[str]:
        if "error" in r:
            return [r["step"], f"FAILED: {r['error'].splitlines()[0]}", "", "", "", "", ""]
        return [r["step"], r["config"], fmt(r["podrl_steps_per_second"], ",.0f"), r["reference"],
                fmt(r["reference_steps_per_second"], ",.0f"), fmt(r["ratio"], ".2f"),
                f"{fmt(r['podrl_cores'], '.1f')} / {fmt(r['reference_cores'], '.1f')}"]

    text = table(["step", "config", ">podrl steps/s", "reference", ">reference steps/s", ">podrl / reference",
                  ">cores podrl / ref"], map(cells, rows))
    seconds = sum(r["seconds"] for r in results.values())
    return text + f"\n\nSteps run: {seconds:.0f} s of wall time (budget {TOTAL_BUDGET_S} s)."


def main(argv: list[str] | None = None) -> int:
    parser = new_parser(__doc__, quick="every step with --quick (smoke test, numbers meaningless)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan and check each step's flags; run nothing")
    parser.add_argument("--steps", nargs="+", choices=[s.name for s in STEPS + ACTOR_STEPS],
                        default=[s.name for s in STEPS], help="run only these steps (default: the default plan)")
    args = parser.parse_args(argv)
    steps = tuple(s for s in STEPS + ACTOR_STEPS if s.name in args.steps)
    problems = check_plan(steps)
    for step in steps:
        print(f"{step.name:16s} budget {step.budget_s:3d} s: {step.command}")
    print(f"total budget {sum(s.budget_s for s in steps)} s of {TOTAL_BUDGET_S} s")
    for problem in problems:
        print(f"PLAN PROBLEM: {problem}", file=sys.stderr)
    if args.dry_run or problems:
        return 1 if problems else 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for step in steps:
            results[step.name] = run_step(step, Path(tmp), args.quick)
            print(f"{step.name}: {results[step.name].get('error', 'done')} in {results[step.name]['seconds']:.0f} s",
                  file=sys.stderr, flush=True)
    rows = summary_rows(results)
    return finish("bench_gpu", args, rows, markdown(rows, results), start, steps=results)


if __name__ == "__main__":
    sys.exit(main())
