"""podrl against the peers that published its other layouts, timed side by side in one run.

Rows (each side in a fresh process; repeats outer, rows inner, peer then podrl, so a burst of
load from elsewhere hits both; medians over --repeats):

  sebulba      Stoix's Sebulba PPO (stoix/systems/ppo/sebulba/ff_ppo.py, jax 0.5.3) vs podrl's
               `train_sebulba` PPO: envpool CartPole-v1, 16 envs x 32 steps on one actor thread,
               actor device 0, learner device 1 (2 CPU JAX devices), 64-64 tanh MLPs, 4 epochs x
               4 minibatches, lr 2.5e-4 constant, one-update lag; both clocked from the end of
               update 1 to the end of update N (env steps of updates 2..N over those seconds).
               podrl's row also gives the env-only ceiling of the same 16 envs (`ceiling`).
  minatar-ppo  PureJaxRL's ppo.py (gymnax 0.0.9, jax 0.4.38, hidden width 256 as gymnax-blines)
               vs `--preset minatar-ppo` (Anakin, 1 device): Breakout-MinAtar, 64 envs x 128
               steps, 4 epochs x 8 minibatches, lr 5e-4, gamma 0.999; run-only = one compiled call.
  minatar-pqn  purejaxql's pqn_minatar.py (jax 0.4.38) vs `agent:pqn` with its yaml's values
               (128 envs x 32 steps, 2 epochs x 32 minibatches, LayerNorm MinAtar CNN).

Columns: run-only steps/s; compile s (podrl: its program's; Stoix: not separable, its first
update); time to result (process start to the final return printed); final return; podrl /
peer; and the jax-version control: scripts/peers/jax_control.py, the same pure-JAX PPO update
(kernel per row) timed in the peer's venv and in podrl's. `control` = peer us / podrl us per
update (> 1: podrl's jax alone is that much faster); `framework` = steps ratio / control, the
part of the ratio the jax version does not explain. Every config difference that remains
between the sides is listed under the table (DIFFERENCES).

Each peer lives in its own venv from its own source tree (scripts/peers/registry.py):

    python scripts/bench_peer_programs.py --setup-peer all       # venvs; prints how to get each source
    python scripts/bench_peer_programs.py --repeats 2 --out peer_programs.json
    python scripts/bench_peer_programs.py --rows sebulba --repeats 2
    python scripts/bench_peer_programs.py --quick                # smoke test: tiny budgets

Without a peer's venv or source its cells say "not measured" (and why); podrl's are measured.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_common import (add_child_run_flags, child_env, emit_result, finish, fmt, load_note, median_of, new_parser,
                          repeats_document, run_child_script)

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from registry import PEERS, SCRIPTS, SRC_ROOT, VENV_ROOT, setup, source_status  # noqa: E402

CONTROL = SCRIPTS / "jax_control.py"


@dataclasses.dataclass(frozen=True)
class Row:
    """One comparison: the peer's spec, podrl's spec, the control kernel, the differences left."""

    name: str
    peer: str  # a key of registry.PEERS
    peer_spec: dict
    podrl_spec: dict
    kernel: str  # jax_control kernel
    differences: tuple[str, ...]


SEBULBA = dict(num_envs=16, rollout_length=32, epochs=4, minibatches=4, hidden=[64, 64], learning_rate=2.5e-4,
               eval_episodes=32)
ROWS = {
    "sebulba": Row(
        "sebulba", "stoix", {**SEBULBA, "updates": 150},
        {**SEBULBA, "kind": "sebulba", "env": "envpool:CartPole-v1", "updates": 150, "lag": "1"}, "mlp64",
        ("advantages: Stoix standardizes over the whole rollout, podrl per minibatch",
         "optimisers: Stoix has separate actor and critic Adams (eps 1e-5, each clipped to norm 0.5); podrl one "
         "Adam over both (eps 1e-5, joint clip 0.5)",
         "lag: Stoix (synchronous=False) skips the params fetch before its 2nd rollout, then blocks for the newest; "
         "podrl lag=1 acts with version i-1 for rollout i",
         "evaluation: Stoix's evaluator samples from the policy (evaluation_greedy=False), podrl's is greedy",
         "env: both envpool 1.2.5 CartPole-v1 (its own auto-reset); Stoix wraps it in stoa's EnvPoolToStoa")),
    "minatar-ppo": Row(
        "minatar-ppo", "purejaxrl", {"env": "Breakout-MinAtar", "total_timesteps": 32768, "hidden": 256},
        {"kind": "minatar-ppo", "env": "gymnax:Breakout-MinAtar", "total_steps": 32768, "eval_episodes": 32},
        "mlp256",
        ("advantages: PureJaxRL standardizes per minibatch, like podrl",
         "value loss: both clipped; PureJaxRL's entropy/value coefficients as podrl's (0.01, 0.5)",
         "gymnax: peer 0.0.9, podrl 1.0.1 (the same MinAtar Breakout dynamics; podrl's env wrappers)",
         "final return: peer = its training episodes of the last 10% of updates (sampled actions); podrl = "
         "32 greedy evaluation episodes (after the timed call)")),
    "minatar-pqn": Row(
        "minatar-pqn", "purejaxql", {"env": "Breakout-MinAtar", "total_timesteps": 32768},
        {"kind": "minatar-pqn", "env": "gymnax:Breakout-MinAtar", "total_steps": 32768, "eval_episodes": 32},
        "cnn16",
        ("optimiser: purejaxql RAdam, podrl Adam (lr 5e-4 linearly annealed, clip 10 on both)",
         "network: purejaxql LayerNorm after the conv and the dense, He-normal init, a BatchNorm it ignores; podrl "
         "LayerNorm after each hidden layer, orthogonal init",
         "epsilon decay: both over 10% of the updates of the run's budget",
         "input: purejaxql divides the 0/1 MinAtar frame by 255, podrl feeds it as 0/1 floats",
         "final return: peer = mean LogWrapper return of its last 10% of updates; podrl = 32 greedy episodes")),
}


def quick(row: Row) -> Row:
    """`row` with tiny budgets (smoke test; numbers meaningless)."""
    peer, ours = dict(row.peer_spec), dict(row.podrl_spec)
    if "updates" in peer:
        peer["updates"] = ours["updates"] = 3
        peer["eval_episodes"] = ours["eval_episodes"] = 2
    else:
        per_update = 8192 if row.name == "minatar-ppo" else 4096
        peer["total_timesteps"] = ours["total_steps"] = per_update
        ours["eval_episodes"] = 2
    return dataclasses.replace(row, peer_spec=peer, podrl_spec=ours)


# ---------------------------------------------------------------- sides


def run_python(python: Path, script: Path, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """`python script <spec JSON>`'s BENCH_RESULT, with `wall_seconds` (time to result) and `load_1m`."""
    if not python.exists():
        return {"error": f"interpreter {python} not found (run --setup-peer)"}
    start = time.perf_counter()
    try:
        proc = subprocess.run([str(python), str(script), json.dumps(spec)], capture_output=True, text=True,
                              timeout=timeout, env=child_env())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s", "load_1m": os.getloadavg()[0]}
    info = {"wall_seconds": time.perf_counter() - start, "load_1m": os.getloadavg()[0]}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("BENCH_RESULT "):
            return {**json.loads(line[len("BENCH_RESULT "):]), **info}
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
    return {"error": f"exit code {proc.returncode}: " + "\n".join(tail), **info}


def run_peer(row: Row, args) -> dict[str, Any]:
    peer = PEERS[row.peer]
    missing = source_status(peer, Path(args.src_root))
    if missing:
        return {"error": missing}
    spec = {**row.peer_spec, "src": str(peer.source(Path(args.src_root)))}
    return run_python(peer.python(Path(args.venv_root)), SCRIPTS / peer.driver, spec, args.timeout)


def run_control(row: Row, python: Path, args) -> dict[str, Any]:
    steps = 10 if args.quick else {"mlp64": 200, "mlp256": 50, "cnn16": 20}[row.kernel]
    return run_python(python, CONTROL, {"kernel": row.kernel, "steps": steps, "repeats": 3 if args.quick else 5},
                      args.timeout)


def measure_row(row: Row, args, runs: dict[str, list]) -> None:
    """One round of `row`: peer, podrl (and its ceiling), control in the peer's venv and in ours."""
    peer_python = PEERS[row.peer].python(Path(args.venv_root))
    steps = [("peer", lambda: run_peer(row, args)),
             ("podrl", lambda: run_child_script(__file__, row.podrl_spec, args.timeout))]
    if row.podrl_spec["kind"] == "sebulba":
        spec = {"kind": "ceiling", "env": row.podrl_spec["env"], "num_envs": row.podrl_spec["num_envs"],
                "seconds": 0.3 if args.quick else 5.0}
        steps.append(("ceiling", lambda: run_child_script(__file__, spec, args.timeout)))
    steps += [("control_peer", lambda: run_control(row, peer_python, args)),
              ("control_podrl", lambda: run_control(row, Path(sys.executable), args))]
    for side, fn in steps:
        result = fn()
        runs.setdefault(side, []).append(result)
        status = result["error"].splitlines()[0] if "error" in result else ", ".join(
            f"{k} {result[k]:,.1f}" for k in ("steps_per_second", "us_per_update", "wall_seconds") if k in result)
        print(f"{row.name:12s} {side:14s} {status}", file=sys.stderr, flush=True)


def summarize(row: Row, runs: dict[str, list]) -> dict[str, Any]:
    """Medians per side, the ratios and the control."""
    entry: dict[str, Any] = {"name": row.name, "peer_name": row.peer, "peer_commit": PEERS[row.peer].commit,
                             "peer_spec": row.peer_spec, "podrl_spec": row.podrl_spec, "kernel": row.kernel,
                             "differences": list(row.differences)}
    for side, side_runs in runs.items():
        ok = [r for r in side_runs if "error" not in r]
        entry[side] = {k: median_of(ok, k) for k in ("steps_per_second", "compile_seconds", "wall_seconds",
                                                      "final_return", "us_per_update", "first_update_s")}
        entry[side].update(measured=bool(ok), runs=side_runs,
                           jax_version=next((r.get("jax_version") for r in ok if r.get("jax_version")), None))
    ours, peer = entry["podrl"], entry["peer"]
    both = ours["measured"] and peer["measured"]
    entry["steps_ratio"] = ours["steps_per_second"] / peer["steps_per_second"] if both else None
    entry["time_to_result_ratio"] = ours["wall_seconds"] / peer["wall_seconds"] if both else None
    cp, co = entry["control_peer"], entry["control_podrl"]
    entry["control"] = cp["us_per_update"] / co["us_per_update"] if cp["measured"] and co["measured"] else None
    entry["framework_ratio"] = (entry["steps_ratio"] / entry["control"]
                                if entry["steps_ratio"] is not None and entry["control"] else None)
    if "ceiling" in entry and entry["ceiling"]["measured"] and ours["measured"]:
        entry["fraction_of_ceiling"] = ours["steps_per_second"] / entry["ceiling"]["steps_per_second"]
    return entry


# ---------------------------------------------------------------- report


def side_line(e: dict[str, Any], side: str) -> str:
    s = e[side]
    label = e["peer_name"] if side == "peer" else "podrl"
    if not s["measured"]:
        why = s["runs"][0]["error"].strip().splitlines()[-1][:300] if s["runs"] else "not run"
        return f"| {e['name']} | {label} | not measured ({why}) | | | | | |"
    extra = ""
    if side == "podrl" and e["steps_ratio"] is not None:
        extra = (f"{e['steps_ratio']:.2f}x steps/s, {e['time_to_result_ratio']:.2f}x time; control "
                 f"{fmt(e['control'], '.2f')}x, framework {fmt(e['framework_ratio'], '.2f')}x")
    if side == "podrl" and "fraction_of_ceiling" in e:
        extra += f"; {e['fraction_of_ceiling']:.0%} of env-only {e['ceiling']['steps_per_second']:,.0f}"
    control = e["control_peer" if side == "peer" else "control_podrl"]
    compile_s = s["compile_seconds"] if s["compile_seconds"] is not None else s["first_update_s"]
    return (f"| {e['name']} | {label} (jax {s['jax_version'] or control['jax_version'] or '?'}) | "
            f"{fmt(s['steps_per_second'], ',.0f')} | {fmt(compile_s, '.1f')} | {fmt(s['wall_seconds'], '.1f')} | "
            f"{fmt(s['final_return'], '.1f')} | {fmt(control['us_per_update'], ',.0f')} | {extra} |")


def markdown(table: list[dict[str, Any]]) -> str:
    lines = ["| row | side | run-only steps/s | compile s | time to result s | final return | control us/update "
             "| podrl / peer |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for e in table:
        lines += [side_line(e, "peer"), side_line(e, "podrl")]
    notes = ["", "Config differences left between the sides:"]
    for e in table:
        notes += [f"- {e['name']}: {d}" for d in e["differences"]]
    loads = [r["load_1m"] for e in table for side in ("peer", "podrl") for r in e[side]["runs"] if "load_1m" in r]
    caption = ("Medians of each side's runs. control = the same pure-JAX update (scripts/peers/jax_control.py) in "
               "the peer's venv / in podrl's (> 1: podrl's jax alone is faster); framework = steps ratio / control. "
               f"Stoix's compile cell is its first update's end (process-relative).{load_note(loads)}")
    return "\n".join(lines + notes + ["", caption])


def main(argv: list[str] | None = None) -> int:
    parser = new_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=2, help="rounds per row (median reported)")
    parser.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=sorted(ROWS), help="which rows")
    parser.add_argument("--venv-root", default=str(VENV_ROOT), help="the peers' venvs: <root>/<peer>")
    parser.add_argument("--src-root", default=str(SRC_ROOT), help="the peers' source trees: <root>/<peer>")
    parser.add_argument("--setup-peer", choices=[*sorted(PEERS), "all"], help="create that peer's venv and exit")
    add_child_run_flags(parser, timeout=900.0, quick_help="tiny budgets (smoke test; numbers meaningless)")
    args = parser.parse_args(argv)
    if args.child:
        from bench_peer_podrl import measure

        emit_result(measure(json.loads(args.child)))
        return 0
    if args.setup_peer:
        names = sorted(PEERS) if args.setup_peer == "all" else [args.setup_peer]
        return max(setup(PEERS[n], Path(args.venv_root), Path(args.src_root)) for n in names)
    rows = [quick(ROWS[n]) if args.quick else ROWS[n] for n in args.rows]
    start, runs = time.perf_counter(), {r.name: {} for r in rows}
    for repeat in range(args.repeats):
        print(f"round {repeat + 1}/{args.repeats}", file=sys.stderr, flush=True)
        for row in rows:
            measure_row(row, args, runs[row.name])
    table = [summarize(r, runs[r.name]) for r in rows]
    wall = time.perf_counter() - start

    def document() -> dict[str, Any]:
        import jax

        return repeats_document(table, args, wall, jax.__version__, benchmark="bench_peer_programs")

    return finish([{} for _ in table], markdown(table), wall, args.out, document)


if __name__ == "__main__":
    sys.exit(main())
