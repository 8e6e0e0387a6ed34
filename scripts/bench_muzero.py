"""Benchmark Sebulba MuZero: env steps/s against actor threads and search simulations, next to the
env-only ceiling, and where the time goes.

For every point (actor threads x num_simulations) two child processes (fresh JAX each) run:

  sebulba    MuZero (`agent:muzero`, `--search`, `num_simulations`, `min_fill` and `buffer_size` sized to
             the envs (`replay_fields`), the defaults otherwise) trained
             with `train_sebulba` on 2 CPU JAX devices: actor device 0 (every actor thread's search),
             learner device 1, `threads` actor threads of `--num-envs` envs each, no evaluation
             (scripts/bench_sebulba_measure.py's `sebulba` measurement).
  ceiling    the same host vector envs, `threads` copies stepped concurrently with random actions,
             no JAX (its `ceiling` measurement, shared by the points with the same thread count).

and for every simulation count one more child:

  parts      MuZero's pieces jitted and timed alone on one device (scripts/bench_muzero_parts.py):
             an `act` call on `--num-envs` observations split into model inference (the
             representation, dynamics and prediction networks: root + num_simulations recurrent
             steps) and mctx's tree work (the rest), and an update on a real rollout split into
             replay (adding it, sampling windows, computing their targets) and SGD (the rest).

Steps/s is the learner's consumed env steps per second after compilation. The shares come from
Sebulba's per-update stage timings (steady-state windows): per actor thread, env stepping
(`time/env_step_s`), search (`time/inference_s`: `act` is the search, mctx's representation,
dynamics and prediction calls inside it) and the wait to hand a rollout over; the search's share
is split into tree work and model inference in the proportion the `parts` child measured. On the
learner, `time/learner_step_s` is one compiled update; the `parts` child gives its replay and SGD
seconds timed alone. Figures are indicative on a shared machine: the table says the load.

Usage:
  python scripts/bench_muzero.py --out /tmp/muzero-bench.json                 # threads 1 2 x simulations 4 16
  python scripts/bench_muzero.py --threads 1 --simulations 4 --quick          # smoke test
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Any

from bench_common import (add_child_run_flags, emit_result, finish, fmt, host_fields, load_note, new_parser,
                          run_child_script)
from bench_sebulba_measure import Measurement, run_child

QUICK_UPDATES, UPDATES = 3, 24


def devices_note() -> str:
    """Where the children act and learn: 2 CPU JAX devices, or the one accelerator of JAX_PLATFORMS."""
    platform = os.environ.get("JAX_PLATFORMS", "cpu")
    if platform == "cpu":
        return "actor device 0, learner device 1 (2 CPU JAX devices)"
    return f"actor and learner on device 0 ({platform}: one accelerator acts and learns)"


def replay_fields(envs: int) -> dict[str, int]:
    """MuZero's `min_fill` and `buffer_size` for `envs` envs on one learner: the defaults, raised so the
    warm-up holds one window (unroll_steps + td_steps) of every env and rounded up to whole rows of envs."""
    from podrl.agents.muzero.config import MuZeroConfig

    defaults = MuZeroConfig()
    min_fill = max(defaults.min_fill, defaults.window_length * envs)
    buffer_size = -(-max(defaults.buffer_size, 2 * min_fill) // envs) * envs
    return {"min_fill": min_fill, "buffer_size": buffer_size}


def measurements(args) -> list[tuple[str, Measurement]]:
    """`(label, measurement)` of every run, ceilings first (one per thread count)."""
    runs = [(f"ceiling t={t}", Measurement("ceiling", args.env, t, args.num_envs,
                                           min_seconds=0.3 if args.quick else args.ceiling_seconds))
            for t in args.threads]
    updates = QUICK_UPDATES if args.quick else args.updates
    runs += [(f"parts sims={sims}", Measurement("parts", args.env, 1, args.num_envs, args.rollout_length,
                                                agent="muzero", agent_fields={"search": args.search,
                                                                              "num_simulations": sims,
                                                                              **replay_fields(args.num_envs)}))
             for sims in args.simulations]
    for t in args.threads:
        for sims in args.simulations:
            fields = {"search": args.search, "num_simulations": sims, **replay_fields(t * args.num_envs)}
            steps = updates * t * args.num_envs * args.rollout_length
            runs.append((f"sebulba t={t} sims={sims}", Measurement(
                "sebulba", args.env, t, args.num_envs, args.rollout_length, args.lag, steps,
                agent="muzero", agent_fields=fields)))
    return runs


def make_row(m: Measurement, run: dict[str, Any], ceiling: dict[str, Any], parts: dict[str, Any]) -> dict[str, Any]:
    """One table row: steps/s, the ceiling, the stage shares of an update's time and the `parts` split."""
    row = {"threads": m.threads, "num_simulations": m.agent_fields["num_simulations"], "envs_per_thread":
           m.envs_per_thread, "rollout_length": m.rollout_length, "load_1m": run.get("load_1m")}
    if "error" in run or "error" in ceiling or "error" in parts:
        return {**row, "error": run.get("error") or ceiling.get("error") or parts.get("error")}
    stages = run["stage_seconds_per_update"]
    actor = {k: stages[k] / m.threads for k in ("time/env_step_s", "time/inference_s", "time/actor_queue_put_wait_s")}
    actor_total = sum(actor.values()) or float("nan")
    search_share = actor["time/inference_s"] / actor_total
    tree_fraction = parts["tree_s"] / parts["act_s"]
    return {**row,
            "actor_share_search_tree": search_share * tree_fraction,
            "actor_share_model_inference": search_share * (1.0 - tree_fraction),
            "parts": {k: v for k, v in parts.items() if k not in ("wall_seconds", "load_1m")},
            "steps_per_second": run["steady_steps_per_second"] or run["steps_per_second"],
            "ceiling_steps_per_second": ceiling["steps_per_second"],
            "compile_seconds": run["compile_seconds"],
            "actor_share_env": actor["time/env_step_s"] / actor_total,
            "actor_share_search_inference": search_share,
            "actor_share_handover_wait": actor["time/actor_queue_put_wait_s"] / actor_total,
            "learner_step_s": stages["time/learner_step_s"],
            "learner_queue_wait_s": stages["time/learner_queue_wait_s"],
            "actor_seconds_per_update": actor_total,
            "policy_lag_mean": run["policy_lag_mean"]}


def markdown_table(rows: list[dict[str, Any]], args) -> str:
    head = ("| threads | sims | MuZero steps/s | env-only ceiling | ratio | actor time: env / search tree / "
            "model inference / hand-over | learner step s | alone: replay / SGD s | learner wait s |\n"
            "|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['threads']} | {r['num_simulations']} | error: {r['error'].splitlines()[0]} ||||||")
            continue
        lines.append(
            f"| {r['threads']} | {r['num_simulations']} | {fmt(r['steps_per_second'], ',.0f')} | "
            f"{fmt(r['ceiling_steps_per_second'], ',.0f')} | "
            f"{fmt(r['steps_per_second'] / r['ceiling_steps_per_second'], '.3f')} | "
            f"{fmt(r['actor_share_env'], '.0%')} / {fmt(r['actor_share_search_tree'], '.0%')} / "
            f"{fmt(r['actor_share_model_inference'], '.0%')} / {fmt(r['actor_share_handover_wait'], '.0%')} | "
            f"{fmt(r['learner_step_s'], '.3f')} | {fmt(r['parts']['replay_s'], '.3f')} / "
            f"{fmt(r['parts']['sgd_s'], '.3f')} | {fmt(r['learner_queue_wait_s'], '.3f')} |")
    loads = [r["load_1m"] for r in rows if r.get("load_1m") is not None]
    caption = (f"\nSebulba MuZero ({args.search} search) on {args.env}, {args.num_envs} envs x {args.rollout_length} "
               f"steps per actor thread, lag {args.lag}, {devices_note()}."
               + " Search tree / model inference: the search's share split as an `act` call timed alone splits; "
               "replay / SGD: one update's replay work (add, sample windows, targets) and the rest, timed alone "
               "on one device (scripts/bench_muzero_parts.py)." + load_note(loads))
    return "\n".join(lines) + caption


def parse_args(argv):
    parser = new_parser(__doc__)
    parser.add_argument("--env", default="CartPole-v1", help="a host env (make_host_env name)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="actor threads")
    parser.add_argument("--simulations", type=int, nargs="+", default=[4, 16], help="num_simulations values")
    parser.add_argument("--search", default="gumbel", choices=("gumbel", "muzero"))
    parser.add_argument("--num-envs", type=int, default=16, help="envs per actor thread")
    parser.add_argument("--rollout-length", type=int, default=16)
    parser.add_argument("--lag", default="1")
    parser.add_argument("--updates", type=int, default=UPDATES, help="updates per Sebulba run")
    parser.add_argument("--ceiling-seconds", type=float, default=5.0)
    add_child_run_flags(parser, timeout=900.0, quick_help="tiny runs (smoke test, numbers meaningless)")
    args = parser.parse_args(argv)
    if not args.child and min([args.num_envs, args.rollout_length, args.updates, *args.threads,
                               *args.simulations]) < 1:
        parser.error("--threads, --simulations, --num-envs, --rollout-length and --updates must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        if spec["kind"] != "parts":
            return run_child(args.child)
        from bench_muzero_parts import measure_parts

        quick = spec.pop("quick")
        emit_result(measure_parts(Measurement(**{**spec, "hidden_sizes": tuple(spec["hidden_sizes"])}), quick))
        return 0
    start = time.perf_counter()
    results = {}
    for label, m in measurements(args):
        spec = {**dataclasses.asdict(m), **({"quick": args.quick} if m.kind == "parts" else {})}
        results[label] = (m, run_child_script(__file__, spec, args.timeout))
        run = results[label][1]
        if "error" in run:
            status = run["error"].splitlines()[0]
        elif m.kind == "parts":
            status = f"act {run['act_s'] * 1e3:.1f} ms, update {run['update_s'] * 1e3:.1f} ms"
        else:
            status = f"{run['steps_per_second']:,.0f} steps/s"
        print(f"{label}: {status} (load {run.get('load_1m', float('nan')):.1f})", file=sys.stderr, flush=True)
    rows = [make_row(m, run, results[f"ceiling t={m.threads}"][1],
                     results[f"parts sims={m.agent_fields['num_simulations']}"][1])
            for m, run in results.values() if m.kind == "sebulba"]
    wall = time.perf_counter() - start
    import jax

    doc = lambda: {"benchmark": "bench_muzero", **host_fields(jax.__version__), "quick": args.quick,  # noqa: E731
                   "search": args.search, "env": args.env, "wall_seconds": wall, "rows": rows,
                   "ceilings": {k: r for k, (m, r) in results.items() if m.kind == "ceiling"}}
    return finish(rows, markdown_table(rows, args), wall, args.out, doc)


if __name__ == "__main__":
    sys.exit(main())
