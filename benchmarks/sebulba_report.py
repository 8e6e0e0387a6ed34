"""The report side of benchmarks.sebulba: JSON rows (medians over repeats), the per-update time
breakdown and the markdown table."""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from benchmarks.harness import fmt, load_note, loads_of, median_of, ok_runs, spread_of, table
from benchmarks.sebulba_measure import DEVICES, STAGES

TARGETS = {"CartPole-v1": 0.50, "ale:Pong": 0.85}
"""Sebulba steps/s as a fraction of the env-only ceiling that the layout should reach."""


def _median_stages(runs: list[dict[str, Any]]) -> dict[str, float | None] | None:
    stages = [r["stage_seconds_per_update"] for r in runs]
    if not stages:
        return None
    return {k: statistics.median(s[k] for s in stages) if all(s.get(k) is not None for s in stages) else None
            for k in STAGES}


def make_row(p, args: argparse.Namespace, ceiling_runs: list, sebulba_runs: list) -> dict[str, Any]:
    """One JSON row: medians over the repeats of the point, with every raw run kept."""
    ok, ceiling_ok = ok_runs(sebulba_runs), ok_runs(ceiling_runs)
    length = p.rollout_length
    sps, ceiling = median_of(ok, "steps_per_second"), median_of(ceiling_ok, "steps_per_second")
    row: dict[str, Any] = {
        "env": p.env, "threads": p.threads, "envs_per_thread": p.envs_per_thread, "rollout_length": length,
        "lag": p.lag, "steps_per_update": p.threads * p.envs_per_thread * length,
        "env_groups": p.env_groups, "pipeline": p.pipeline,
        "code": p.code if p.code == "current" else f"baseline {args.baseline}",
        "config": {"agent": "PPO", "num_epochs": args.num_epochs, "num_minibatches": args.num_minibatches,
                   "actor_devices": [0], "learner_devices": [1], "cpu_devices": DEVICES,
                   "hidden_sizes": list(getattr(args, "hidden_sizes", [64, 64])),
                   "pool": getattr(args, "pool", 0), "learn": p.learn,
                   "vectorization": "sync", "eval_episodes": 0, "logging": None},
        "steps_per_second": sps,
        "steps_per_second_spread": spread_of(ok, "steps_per_second"),
        "steady_steps_per_second": median_of(ok, "steady_steps_per_second"),
        "compile_seconds": median_of(ok, "compile_seconds"),
        "ceiling_steps_per_second": ceiling,
        "fraction_of_ceiling": sps / ceiling if (sps and ceiling) else None,
        "target_fraction": TARGETS.get(p.env),
        "policy_lag_mean": median_of(ok, "policy_lag_mean"),
        "cpu_cores_used": median_of(ok, "cpu_cores_used"),
        "ceiling_cpu_cores_used": median_of(ceiling_ok, "cpu_cores_used"),
        "stage_seconds_per_update": _median_stages(ok),
        "trajectory_bytes_per_step": ok[0]["trajectory_bytes_per_step"] if ok else None,
        "runs": sebulba_runs,
        "ceiling_runs": ceiling_runs,
    }
    target = row["target_fraction"]
    row["meets_target"] = (row["fraction_of_ceiling"] >= target) if (target and row["fraction_of_ceiling"]) else None
    if row["stage_seconds_per_update"] and row["steady_steps_per_second"]:
        row["per_thread_ms_per_update"] = per_thread_breakdown(row)
    errors = [r["error"] for r in sebulba_runs + ceiling_runs if "error" in r]
    if not ok or not ceiling_ok:
        row["error"] = errors[-1]
    return row


BREAKDOWN = {"env_step": "time/env_step_s", "inference": "time/inference_s",
             "actor_params_wait": "time/actor_params_wait_s", "actor_put_wait": "time/actor_queue_put_wait_s",
             "actor_transfer": "time/actor_transfer_s"}
"""The actor stages of the breakdown (per thread), by name."""


def per_thread_breakdown(row: dict[str, Any]) -> dict[str, float | None]:
    """One update in ms: wall time, each actor thread's stages (history sums / threads: env = blocked in env
    calls, inference = dispatching and waiting for actions, params wait, put wait, transfer = placing the
    rollout on the learner) and 'actor_other' = wall - those (recording steps, Python; with env groups
    also the time the envs and inference overlap nothing), and the learner's stages. A stage the code did
    not time (a --baseline revision: transfer) is None and stays inside actor_other."""
    stages, threads = row["stage_seconds_per_update"], row["threads"]
    wall = row["steps_per_update"] / row["steady_steps_per_second"]
    actor = {name: None if stages.get(k) is None else 1e3 * stages[k] / threads for name, k in BREAKDOWN.items()}
    return {
        "update_wall": 1e3 * wall, **actor,
        "actor_other": 1e3 * wall - sum(v for v in actor.values() if v is not None),
        "learner_step": 1e3 * stages["time/learner_step_s"],
        "learner_queue_wait": 1e3 * stages["time/learner_queue_wait_s"],
    }


def caption(args: argparse.Namespace) -> str:
    return (
        "Targets: Sebulba >= 85% of the env-only ceiling on ALE Pong ('ale:Pong', ale-py AtariVectorEnv, "
        "84x84x4 uint8, the default 'machado' protocol: sticky actions 0.25; PPO with the Nature CNN) and >= 50% on "
        "CartPole-v1 (gymnasium SyncVectorEnv). steps/s = "
        "SebulbaResult.steps_per_second (env steps consumed by the learner per second, compile "
        "excluded); ceiling = the same host vector env(s), one per actor thread, stepped concurrently "
        "with random actions and nothing else. PPO "
        f"({args.num_epochs} epochs x {args.num_minibatches} minibatches), 2 CPU JAX devices (actor 0, "
        "learner 1). cores S/ceil = CPU seconds per second the Sebulba child (training part) / the "
        "ceiling child used: below 2 means the run did not get both cores (idle waits or other tenants). "
        "Timings are ms per update (one rollout from every thread), steady-state windows: "
        "wall = steps per update / steady steps/s; env (blocked in env calls), infer (dispatching act and "
        "waiting for its actions), params wait, put wait, transfer (placing the rollout on the learner) and "
        "actor other (wall - those: recording steps, Python; a baseline revision's transfer is in it; slightly "
        "negative in short runs, where a window consumes rollouts collected in the one before) are per actor "
        "thread; learn = learner step incl. publishing params, l.wait = learner waiting for rollouts. "
        "pipeline actor = the learner consumes rollouts without updating (the actor loop alone); code = this "
        "checkout, or the --baseline revision's podrl/; groups = SebulbaConfig.env_groups."
    )


COLUMNS = ["env", "threads x envs", "lag", "pipeline", "code", ">groups", ">steps/s", ">ceiling steps/s",
           ">Sebulba/ceiling", ">target", ">compile s", ">cores S/ceil", ">wall ms", ">env ms", ">infer ms",
           ">params wait ms", ">put wait ms", ">transfer ms", ">actor other ms", ">learn ms", ">l.wait ms",
           ">policy lag", ">traj bytes/step"]


def table_cells(r: dict[str, Any]) -> list[str]:
    """One row's cells of the markdown table."""
    b = r.get("per_thread_ms_per_update") or {}
    mark = {True: " (met)", False: " (missed)"}.get(r["meets_target"], "")
    return [
        r["env"], f"{r['threads']} x {r['envs_per_thread']}", r["lag"], r.get("pipeline", "full"),
        r.get("code", "current"), str(r.get("env_groups", 1)),
        fmt(r["steps_per_second"], ",.0f") if r["steps_per_second"] else "FAILED",
        fmt(r["ceiling_steps_per_second"], ",.0f"),
        fmt(r["fraction_of_ceiling"], ".1%") + mark,
        fmt(r["target_fraction"], ".0%"),
        fmt(r["compile_seconds"], ".1f"),
        f"{fmt(r['cpu_cores_used'], '.2f')}/{fmt(r['ceiling_cpu_cores_used'], '.2f')}",
        *(fmt(b.get(k), ".1f") for k in ("update_wall", "env_step", "inference", "actor_params_wait",
                                            "actor_put_wait", "actor_transfer", "actor_other", "learner_step",
                                            "learner_queue_wait")),
        fmt(r["policy_lag_mean"], ".2f"),
        fmt((r["trajectory_bytes_per_step"] or {}).get("total"), ",.0f"),
    ]


def markdown_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The results as a markdown table with its caption."""
    loads = loads_of(run for r in rows for run in r["runs"] + r["ceiling_runs"])
    return table(COLUMNS, map(table_cells, rows)) + "\n\n" + caption(args) + load_note(loads) + bytes_note(rows)


def bytes_note(rows: list[dict[str, Any]]) -> str:
    """The caption's sentence on trajectory memory: bytes per env step by field, once per env."""
    notes = {}
    for r in rows:
        sizes = r.get("trajectory_bytes_per_step")
        if sizes and r["env"] not in notes:
            fields = ", ".join(f"{k} {v:,.0f}" for k, v in sizes.items() if k != "total" and v)
            notes[r["env"]] = f"{r['env']}: {sizes['total']:,.0f} ({fields})"
    if not notes:
        return ""
    return (" Trajectory bytes per env step (what the learner receives; next_observation repeats the "
            "observation of the following step): " + "; ".join(notes.values()) + ".")

