"""Benchmark Sebulba MuZero: env steps/s against actor threads and search simulations, next to the
env-only ceiling, and where the time goes.

For every point (actor threads x num_simulations) two child processes (fresh JAX each) run:

  sebulba    MuZero (`agent:muzero`, `--search`, `num_simulations`, `min_fill` and `buffer_size` sized to
             the envs (`replay_fields`), the defaults otherwise) trained
             with `train_sebulba` on 2 CPU JAX devices: actor device 0 (every actor thread's search),
             learner device 1, `threads` actor threads of `--num-envs` envs each, no evaluation
             (benchmarks.sebulba_measure's `sebulba` measurement).
  ceiling    the same host vector envs, `threads` copies stepped concurrently with random actions,
             no JAX (its `ceiling` measurement, shared by the points with the same thread count).

and for every simulation count one more child:

  parts      MuZero's pieces jitted and timed alone on one device (benchmarks.muzero_parts):
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
  python -m benchmarks.muzero --out /tmp/muzero-bench.json                 # threads 1 2 x simulations 4 16
  python -m benchmarks.muzero --threads 1 --simulations 4 --quick          # smoke test
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any

from benchmarks.harness import (
    dispatch,
    emit_result,
    finish,
    fmt,
    load_note,
    loads_of,
    log_run,
    new_parser,
    run_child,
    table,
)
from benchmarks.sebulba_measure import Measurement
from benchmarks.sebulba_measure import child_main as sebulba_child

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


def table_cells(r: dict[str, Any]) -> list[Any]:
    """One row's cells of the markdown table."""
    if "error" in r:
        return [r["threads"], r["num_simulations"], f"error: {r['error'].splitlines()[0]}", *[""] * 6]
    shares = (r["actor_share_env"], r["actor_share_search_tree"], r["actor_share_model_inference"],
              r["actor_share_handover_wait"])
    return [r["threads"], r["num_simulations"], fmt(r["steps_per_second"], ",.0f"),
            fmt(r["ceiling_steps_per_second"], ",.0f"),
            fmt(r["steps_per_second"] / r["ceiling_steps_per_second"], ".3f"),
            " / ".join(fmt(share, ".0%") for share in shares), fmt(r["learner_step_s"], ".3f"),
            f"{fmt(r['parts']['replay_s'], '.3f')} / {fmt(r['parts']['sgd_s'], '.3f')}",
            fmt(r["learner_queue_wait_s"], ".3f")]


def markdown_table(rows: list[dict[str, Any]], args) -> str:
    text = table(["threads", "sims", "MuZero steps/s", "env-only ceiling", "ratio",
                  "actor time: env / search tree / model inference / hand-over", "learner step s",
                  "alone: replay / SGD s", "learner wait s"], map(table_cells, rows))
    caption = (f"\nSebulba MuZero ({args.search} search) on {args.env}, {args.num_envs} envs x {args.rollout_length} "
               f"steps per actor thread, lag {args.lag}, {devices_note()}."
               + " Search tree / model inference: the search's share split as an `act` call timed alone splits; "
               "replay / SGD: one update's replay work (add, sample windows, targets) and the rest, timed alone "
               "on one device (benchmarks.muzero_parts)." + load_note(loads_of(rows)))
    return text + caption


def parse_args(argv):
    parser = new_parser(__doc__, quick="tiny runs (smoke test, numbers meaningless)", timeout=900.0, child=True)
    parser.add_argument("--env", default="CartPole-v1", help="a host env (make_host_env name)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="actor threads")
    parser.add_argument("--simulations", type=int, nargs="+", default=[4, 16], help="num_simulations values")
    parser.add_argument("--search", default="gumbel", choices=("gumbel", "muzero"))
    parser.add_argument("--num-envs", type=int, default=16, help="envs per actor thread")
    parser.add_argument("--rollout-length", type=int, default=16)
    parser.add_argument("--lag", default="1")
    parser.add_argument("--updates", type=int, default=UPDATES, help="updates per Sebulba run")
    parser.add_argument("--ceiling-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    if not args.child and min([args.num_envs, args.rollout_length, args.updates, *args.threads,
                               *args.simulations]) < 1:
        parser.error("--threads, --simulations, --num-envs, --rollout-length and --updates must be positive")
    return args


def child_main(spec_json: str) -> int:
    """Child entry point: a `parts` measurement here, the others benchmarks.sebulba_measure's."""
    spec = json.loads(spec_json)
    if spec["kind"] != "parts":
        return sebulba_child(spec_json)
    from benchmarks.muzero_parts import measure_parts

    quick = spec.pop("quick")
    emit_result(measure_parts(Measurement(**{**spec, "hidden_sizes": tuple(spec["hidden_sizes"])}), quick))
    return 0


def run(args, start: float) -> int:
    """The parent: every run measured in order, the rows made, the table printed, the document written."""
    results = {}
    for label, m in measurements(args):
        spec = {**dataclasses.asdict(m), **({"quick": args.quick} if m.kind == "parts" else {})}
        results[label] = (m, run_child("benchmarks.muzero", spec, args.timeout))
        run = results[label][1]
        parts = "error" not in run and m.kind == "parts"
        log_run(label + (f" (act {run['act_s'] * 1e3:.1f} ms, update {run['update_s'] * 1e3:.1f} ms)" if parts
                         else ""), run)
    rows = [make_row(m, run, results[f"ceiling t={m.threads}"][1],
                     results[f"parts sims={m.agent_fields['num_simulations']}"][1])
            for m, run in results.values() if m.kind == "sebulba"]
    return finish("bench_muzero", args, rows, markdown_table(rows, args), start, search=args.search, env=args.env,
                  ceilings={k: r for k, (m, r) in results.items() if m.kind == "ceiling"})


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


if __name__ == "__main__":
    sys.exit(main())
