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
  minatar-muzero  Stoix's Anakin MuZero (stoix/systems/search/ff_mz.py, jax 0.5.3, gymnax 0.0.9) vs
               `agent:muzero` with its ff_mz.yaml values and its network's widths (Breakout-MinAtar,
               64 envs x 8 steps, 25 simulations, 8 gradient steps of 32 windows per update),
               evaluated after each of 8 training calls: return against env steps and against
               training seconds (the `curve` of each side; `--curves`). Round r runs seed r on both
               sides, so the curves are medians over seeds (--repeats 3: seeds 0, 1, 2).
  <row>-samejax  sebulba, minatar-ppo and minatar-pqn with the peer's same program in a venv on podrl's
               own jax and jaxlib (registry `stoix-samejax`, `purejaxrl-samejax`, `purejaxql-samejax`):
               no jax-version control, its cells say "same jax: no control".

Columns: run-only steps/s; compile s (podrl: its program's; Stoix: not separable, its first
update); time to result (process start to the final return printed); final return; podrl /
peer; and the jax-version control: benchmarks/peers/jax_control.py, the same pure-JAX PPO update
(kernel per row) timed in the peer's venv and in podrl's. `control` = peer us / podrl us per
update (> 1: podrl's jax alone is that much faster); `framework` = steps ratio / control, the
part of the ratio the jax version does not explain. The Sebulba row also has an actor control
(kernel `act64`): one actor step, the row's act on its 16 observations and the host copy of its
outputs, timed in both venvs; `actor control` = peer us / podrl us per step. The update control
covers the learner only and the actor control the actor thread's jax work only: the table gives
both, not one weighted figure. Every config difference that remains
between the sides is listed under the table (DIFFERENCES).

Each peer lives in its own venv from its own source tree (benchmarks/peers/registry.py); podrl's
side is benchmarks.peer_programs_podrl:

    python -m benchmarks.peer_programs --setup-peer all       # venvs; prints how to get each source
    python -m benchmarks.peer_programs --repeats 2 --out peer_programs.json
    python -m benchmarks.peer_programs --rows sebulba --repeats 2
    python -m benchmarks.peer_programs --rows minatar-ppo-samejax minatar-pqn-samejax sebulba-samejax --repeats 2
    python -m benchmarks.peer_programs --quick                # smoke test: tiny budgets

Without a peer's venv or source its cells say "not measured" (and why); podrl's are measured.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    dispatch,
    emit_result,
    finish,
    fmt,
    interleave_sides,
    load_note,
    loads_of,
    median_of,
    new_parser,
    ok_runs,
    ratio,
    run_child,
    side_summary,
    spread_of,
    table,
)
from benchmarks.peers.registry import PEERS, add_peer_flags, run_driver, run_peer, setup_peers

MODULE = "benchmarks.peer_programs"
PROGRAM_PEERS = ("purejaxql", "purejaxrl", "stoix", "purejaxql-samejax", "purejaxrl-samejax", "stoix-samejax")


@dataclasses.dataclass(frozen=True)
class Row:
    """One comparison: the peer's spec, podrl's spec, the control kernel, the differences left."""

    name: str
    peer: str  # a key of registry.PEERS
    driver: str  # its driver, benchmarks/peers/<driver>.py
    peer_spec: dict
    podrl_spec: dict
    kernel: str  # jax_control kernel
    differences: tuple[str, ...]
    seed_per_round: bool = False  # both sides run seed r in round r (a return curve is a median over seeds)
    actor_kernel: str | None = None  # jax_control actor kernel (a Sebulba actor's per-step round trip), if any


SEBULBA = dict(num_envs=16, rollout_length=32, epochs=4, minibatches=4, hidden=[64, 64], learning_rate=2.5e-4,
               eval_episodes=32)
ROWS = {
    "sebulba": Row(
        "sebulba", "stoix", "stoix_sebulba_ppo", {**SEBULBA, "updates": 150},
        {**SEBULBA, "kind": "sebulba", "env": "envpool:CartPole-v1", "updates": 150, "lag": "1"}, "mlp64",
        ("advantages: Stoix standardizes over the whole rollout, podrl per minibatch",
         "optimisers: Stoix has separate actor and critic Adams (eps 1e-5, each clipped to norm 0.5); podrl one "
         "Adam over both (eps 1e-5, joint clip 0.5)",
         "lag: Stoix (synchronous=False) skips the params fetch before its 2nd rollout, then blocks for the newest; "
         "podrl lag=1 acts with version i-1 for rollout i",
         "evaluation: Stoix's evaluator samples from the policy (evaluation_greedy=False), podrl's is greedy",
         "env: both envpool 1.2.5 CartPole-v1 (its own auto-reset); Stoix wraps it in stoa's EnvPoolToStoa"),
        actor_kernel="act64"),
    "minatar-ppo": Row(
        "minatar-ppo", "purejaxrl", "purejaxrl_ppo",
        {"env": "Breakout-MinAtar", "total_timesteps": 32768, "hidden": 256},
        {"kind": "minatar-ppo", "env": "gymnax:Breakout-MinAtar", "total_steps": 32768, "eval_episodes": 32},
        "mlp256",
        ("advantages: PureJaxRL standardizes per minibatch, like podrl",
         "value loss: both clipped; PureJaxRL's entropy/value coefficients as podrl's (0.01, 0.5)",
         "gymnax: peer 0.0.9, podrl 1.0.1 (the same MinAtar Breakout dynamics; podrl's env wrappers)",
         "final return: peer = its training episodes of the last 10% of updates (sampled actions); podrl = "
         "32 greedy evaluation episodes (after the timed call)")),
    "minatar-pqn": Row(
        "minatar-pqn", "purejaxql", "purejaxql_pqn", {"env": "Breakout-MinAtar", "total_timesteps": 32768},
        {"kind": "minatar-pqn", "env": "gymnax:Breakout-MinAtar", "total_steps": 32768, "eval_episodes": 32},
        "cnn16",
        ("optimiser: purejaxql RAdam, podrl Adam (lr 5e-4 linearly annealed, clip 10 on both)",
         "network: purejaxql LayerNorm after the conv and the dense, He-normal init, a BatchNorm it ignores; podrl "
         "LayerNorm after each hidden layer, orthogonal init",
         "epsilon decay: both over 10% of the updates of the run's budget",
         "input: purejaxql divides the 0/1 MinAtar frame by 255, podrl feeds it as 0/1 floats",
         "final return: peer = mean LogWrapper return of its last 10% of updates; podrl = 32 greedy episodes")),
    "minatar-muzero": Row(
        "minatar-muzero", "stoix", "stoix_ff_mz",
        {"game": "breakout", "total_timesteps": 65536, "evaluations": 8, "eval_episodes": 32},
        {"kind": "minatar-muzero", "env": "gymnax:Breakout-MinAtar", "total_steps": 65536, "evaluations": 8,
         "eval_episodes": 32},
        "mlp256",
        ("model: both Stoix's recurrent world model: a 2-layer GRU (256 each) whose carries are the 512-wide state, "
         "scaled to [-1, 1] before each step, the action embedded by a dense layer, a residual, a separate 256-256 "
         "SiLU reward MLP (podrl `dynamics=gru`); representation a 256-256 SiLU MLP on the flattened frame, not "
         "scaled, on both",
         "prediction: Stoix separate 256-256 SiLU actor and critic MLPs; podrl one 256-256 ReLU MLP feeding both heads "
         "(separate SiLU MLPs measured no better: docs/benchmarks.md)",
         "value targets: both bootstrap from the actors' stored root search values (podrl `value_bootstrap=search`; "
         "podrl's target network where the window ends or an episode ended: tau 1, this step's params)",
         "windows: Stoix samples 6 steps and computes n-step returns inside them (k = 4 has 1 step); podrl samples "
         "K + n = 10 steps (every state a full 5-step return)",
         "loss: Stoix KL(search || policy) + 0.25 value CE + reward CE at 5 states, each / 5; podrl CE at 6 states "
         "(weights 1, 1/5, ...), reward at 5 steps",
         "Adam eps: Stoix 1e-5, podrl 1e-8; warm-up: Stoix's 16 x 64 steps are not counted in its env steps, podrl's "
         "min_fill (1,024) is",
         "evaluation: Stoix samples from the search with its acting noise (evaluation_greedy=False), podrl's greedy "
         "search without noise; both 32 episodes after each call"),
        seed_per_round=True),
}
SAME_JAX_PEERS = {"minatar-ppo": "purejaxrl-samejax", "minatar-pqn": "purejaxql-samejax", "sebulba": "stoix-samejax"}
"""The rows whose peer program also runs on podrl's jax (its `-samejax` venv; docs/benchmarks.md says which not)."""


def same_jax_row(row: Row, peer: str) -> Row:
    """`row` with its peer program run by `peer`, a venv on podrl's own jax and jaxlib: no jax-version control."""
    return dataclasses.replace(row, name=f"{row.name}-samejax", peer=peer, differences=(
        *row.differences, f"jax: both sides on podrl's jax ({peer} venv), so no jax-version control"))


ROWS.update({f"{name}-samejax": same_jax_row(ROWS[name], peer) for name, peer in SAME_JAX_PEERS.items()})


def quick(row: Row) -> Row:
    """`row` with tiny budgets (smoke test; numbers meaningless)."""
    peer, ours = dict(row.peer_spec), dict(row.podrl_spec)
    if "updates" in peer:
        peer["updates"] = ours["updates"] = 3
        peer["eval_episodes"] = ours["eval_episodes"] = 2
    else:
        per_update = {"minatar-ppo": 8192, "minatar-muzero": 2048}.get(row.podrl_spec["kind"], 4096)
        peer["total_timesteps"] = ours["total_steps"] = per_update
        peer["eval_episodes"] = ours["eval_episodes"] = 2
        if "evaluations" in peer:
            peer["evaluations"] = ours["evaluations"] = 2
    return dataclasses.replace(row, peer_spec=peer, podrl_spec=ours)


# ---------------------------------------------------------------- sides


def run_control(kernel: str, python: Path, args) -> dict[str, Any]:
    """The jax-version control (benchmarks/peers/jax_control.py, `kernel`: an update's or an actor step's) run
    by `python`."""
    steps = 10 if args.quick else {"mlp64": 200, "mlp256": 50, "cnn16": 20, "act64": 2000}[kernel]
    return run_driver(python, "jax_control", {"kernel": kernel, "steps": steps, "repeats": 3 if args.quick else 5},
                      args.timeout)


def sides(row: Row) -> tuple[str, ...]:
    """What one round of `row` runs, in order: peer, podrl (and its ceiling), the control in each venv (and the
    actor control in each venv, where the row has one); no control where the peer's venv has podrl's jax."""
    ceiling = ("ceiling",) if row.podrl_spec["kind"] == "sebulba" else ()
    if PEERS[row.peer].same_jax:
        return ("peer", "podrl", *ceiling)
    actor = ("actor_control_peer", "actor_control_podrl") if row.actor_kernel else ()
    return ("peer", "podrl", *ceiling, "control_peer", "control_podrl", *actor)


def run_side(row: Row, side: str, args, round_: int = 0) -> dict[str, Any]:
    """One run of `side` of `row` (see `sides`), in a fresh process; round `round_` of the repeats (its seed,
    where the row has `seed_per_round`)."""
    seed = {"seed": round_} if row.seed_per_round else {}
    if side == "peer":
        return run_peer(row.peer, row.driver, {**row.peer_spec, **seed}, args)
    if side == "podrl":
        return run_child(MODULE, {**row.podrl_spec, **seed}, args.timeout)
    if side == "ceiling":
        spec = {"kind": "ceiling", "env": row.podrl_spec["env"], "num_envs": row.podrl_spec["num_envs"],
                "seconds": 0.3 if args.quick else 5.0}
        return run_child(MODULE, spec, args.timeout)
    in_peer = side.endswith("control_peer")
    python = PEERS[row.peer].python(Path(args.venv_root)) if in_peer else Path(sys.executable)
    return run_control(row.actor_kernel if side.startswith("actor_") else row.kernel, python, args)


def summarize(row: Row, runs: dict[str, list]) -> dict[str, Any]:
    """Medians per side, the ratios and the control."""
    entry: dict[str, Any] = {"name": row.name, "peer_name": row.peer, "peer_commit": PEERS[row.peer].commit,
                             "peer_spec": row.peer_spec, "podrl_spec": row.podrl_spec, "kernel": row.kernel,
                             "actor_kernel": row.actor_kernel, "same_jax": PEERS[row.peer].same_jax,
                             "differences": list(row.differences)}
    for side, side_runs in runs.items():
        keys = ("steps_per_second", "compile_seconds", "wall_seconds", "final_return", "us_per_update",
                "us_per_step", "first_update_s")
        entry[side] = side_summary(side_runs, {k: k for k in keys})
        entry[side]["steps_per_second_spread"] = spread_of(side_runs, "steps_per_second")
        entry[side]["jax_version"] = next((r.get("jax_version") for r in side_runs if r.get("jax_version")), None)
        entry[side]["curve"] = median_curve([r["curve"] for r in ok_runs(side_runs) if r.get("curve")])
    ours, peer = entry["podrl"], entry["peer"]
    mine = importlib.metadata.version("jax")
    if entry["same_jax"] and peer["jax_version"] not in (None, mine):  # the venv was made for another podrl jax
        entry["differences"].append(f"jax: NOT the same: the {row.peer} venv has jax {peer['jax_version']}, podrl "
                                    f"{mine}; rebuild it with --setup-peer {row.peer}")
    entry["steps_ratio"] = ratio(ours["steps_per_second"], peer["steps_per_second"])
    entry["time_to_result_ratio"] = ratio(ours["wall_seconds"], peer["wall_seconds"])
    entry["control"] = entry["framework_ratio"] = None  # a same-jax row has none: its steps ratio is the framework's
    if not entry["same_jax"]:
        entry["control"] = ratio(entry["control_peer"]["us_per_update"], entry["control_podrl"]["us_per_update"])
        entry["framework_ratio"] = ratio(entry["steps_ratio"], entry["control"])
    if row.actor_kernel and not entry["same_jax"]:  # peer us / podrl us per actor step (act + host copy)
        entry["actor_control"] = ratio(entry["actor_control_peer"]["us_per_step"],
                                       entry["actor_control_podrl"]["us_per_step"])
    if "ceiling" in entry and entry["ceiling"]["measured"] and ours["measured"]:
        entry["fraction_of_ceiling"] = ours["steps_per_second"] / entry["ceiling"]["steps_per_second"]
    return entry


def median_curve(curves: list[list[dict[str, Any]]]) -> list[dict[str, Any]] | None:
    """Point by point, the median of each field over the runs' curves (None: no run has one)."""
    if not curves:
        return None
    points = min(len(c) for c in curves)
    return [{key: median_of([c[i] for c in curves], key) for key in curves[0][i]} for i in range(points)]


# ---------------------------------------------------------------- report


def curve_table(e: dict[str, Any]) -> str:
    """The row's return against env steps and training seconds, peer and podrl side by side."""
    peer, ours = e["peer"].get("curve") or [], e["podrl"].get("curve") or []
    rows = []
    for i in range(max(len(peer), len(ours))):
        cells = [fmt((peer[i] if i < len(peer) else ours[i])["env_steps"], ",.0f")]
        for side in (peer, ours):
            point = side[i] if i < len(side) else {}
            cells += [fmt(point.get("train_seconds"), ".0f"), fmt(point.get("train_return"), ".2f"),
                      fmt(point.get("eval_return"), ".2f")]
        rows.append(cells)
    name = e["peer_name"]
    return table([">env steps", f">{name} train s", f">{name} train return", f">{name} eval",
                  ">podrl train s", ">podrl train return", ">podrl eval"], rows)


def side_cells(e: dict[str, Any], side: str) -> list[str]:
    """One side's cells of the markdown table."""
    s = e[side]
    label = e["peer_name"] if side == "peer" else "podrl"
    if not s["measured"]:
        why = s["runs"][0]["error"].strip().splitlines()[-1][:300] if s["runs"] else "not run"
        return [e["name"], label, f"not measured ({why})", "", "", "", "", ""]
    extra = ""
    if side == "podrl" and e["steps_ratio"] is not None:
        extra = f"{e['steps_ratio']:.2f}x steps/s, {e['time_to_result_ratio']:.2f}x time; " + (
            "same jax: no control" if e["same_jax"] else
            f"control {fmt(e['control'], '.2f')}x, framework {fmt(e['framework_ratio'], '.2f')}x")
    if side == "podrl" and e.get("actor_kernel") and not e["same_jax"]:
        peer_us, podrl_us = e["actor_control_peer"]["us_per_step"], e["actor_control_podrl"]["us_per_step"]
        extra += (f"; actor control {fmt(e['actor_control'], '.2f')}x ({fmt(peer_us, ',.0f')}"
                  f" / {fmt(podrl_us, ',.0f')} us/step)")
    if side == "podrl" and "fraction_of_ceiling" in e:
        extra += f"; {e['fraction_of_ceiling']:.0%} of env-only {e['ceiling']['steps_per_second']:,.0f}"
    podrl_jax = importlib.metadata.version("jax") if side == "podrl" else None  # a same-jax row has no control run
    control = e.get("control_peer" if side == "peer" else "control_podrl", {"jax_version": podrl_jax})
    control_cell = "same jax: no control" if e["same_jax"] else fmt(control["us_per_update"], ",.0f")
    compile_s = s["compile_seconds"] if s["compile_seconds"] is not None else s["first_update_s"]
    return [e["name"], f"{label} (jax {s['jax_version'] or control['jax_version'] or '?'})",
            fmt(s["steps_per_second"], ",.0f"), fmt(compile_s, ".1f"), fmt(s["wall_seconds"], ".1f"),
            fmt(s["final_return"], ".1f"), control_cell, extra]


def markdown(entries: list[dict[str, Any]]) -> str:
    text = table(["row", "side", ">run-only steps/s", ">compile s", ">time to result s", ">final return",
                  ">control us/update", "podrl / peer"],
                 (side_cells(e, side) for e in entries for side in ("peer", "podrl")))
    notes = ["", "Config differences left between the sides:"]
    for e in entries:
        notes += [f"- {e['name']}: {d}" for d in e["differences"]]
    for e in entries:
        if e["peer"].get("curve") or e["podrl"].get("curve"):
            notes += ["", f"{e['name']}: return against env steps and training seconds (medians over the runs; "
                          "train return: episodes finished in that call; eval: after it)", "", curve_table(e)]
    loads = loads_of(r for e in entries for side in ("peer", "podrl") for r in e[side]["runs"])
    caption = ("Medians of each side's runs. control = the same pure-JAX update (benchmarks/peers/jax_control.py) "
               "in the peer's venv / in podrl's (> 1: podrl's jax alone is faster); framework = steps ratio / control. "
               "actor control = the same actor step (the row's act on its 16 observations, one jitted call, and the "
               "host copy of its outputs) in the peer's venv / in podrl's, each venv's jax with its default dispatch. "
               "A `-samejax` row runs the same peer program in a venv on podrl's own jax and jaxlib: no control, the "
               "steps ratio is the framework's. Stoix's compile cell is its first update's end (process-relative)."
               f"{load_note(loads)}")
    return "\n".join([text] + notes + ["", caption])


def parse_args(argv: list[str] | None = None):
    parser = new_parser(__doc__, quick="tiny budgets (smoke test; numbers meaningless)", repeats=2,
                        repeats_help="rounds per row, interleaved (median reported)", timeout=900.0, child=True)
    parser.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=sorted(ROWS), help="which rows")
    add_peer_flags(parser, PROGRAM_PEERS)
    return parser.parse_args(argv)


def child_main(spec_json: str) -> int:
    """Child entry point: podrl's measurement of one spec (benchmarks.peer_programs_podrl)."""
    from benchmarks.peer_programs_podrl import measure

    emit_result(measure(json.loads(spec_json)))
    return 0


def run(args, start: float) -> int:
    """The parent: the peers' venvs set up (--setup-peer), or every row measured."""
    if args.setup_peer:
        return setup_peers(args, PROGRAM_PEERS)
    rows = [quick(ROWS[n]) if args.quick else ROWS[n] for n in args.rows]
    runs = interleave_sides(rows, sides, args.repeats, lambda row, side, r: run_side(row, side, args, r),
                            lambda row, side: f"{row.name:12s} {side:14s}")
    entries = [summarize(row, row_runs) for row, row_runs in zip(rows, runs)]
    return finish("bench_peer_programs", args, entries, markdown(entries), start)


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


if __name__ == "__main__":
    sys.exit(main())
