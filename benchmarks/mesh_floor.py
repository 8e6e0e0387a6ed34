"""Why a small Anakin PPO is not faster on a 2-device CPU mesh than on one device: the numbers.

One run measures, each in a fresh process (a CPU device count is fixed at start-up):

  latency    microseconds per all-reduce (`lax.pmean` in a scan) of 1 float, of a vector the
             size of the PPO params (the gradient all-reduce) and of 100k floats, on a 1- and
             a 2-device CPU mesh
  count      all-reduces one update runs on each device, counted in a profiler trace of the
             2-device train call (`podrl.run.profiling.summarize_trace`; `--updates-per-call 2`)
  train      podrl's Anakin PPO (CartPole-v1, 4 envs x 128 steps, benchmarks.anakin's training
             measurement) on 1 and 2 devices, interleaved, medians of --repeats

and reports the floor the collectives alone put on a 2-device update (all-reduces per update
x the extra latency of a 2-device all-reduce over a 1-device one) beside the observed gap
(ms per update on 2 devices minus on 1). With 4 envs the per-device rollout is no shorter on
2 devices (each step is a chain of small kernels whatever the batch), so the collectives are
a cost the split cannot pay back.

    python -m benchmarks.mesh_floor --repeats 3 --out floor.json
    python -m benchmarks.mesh_floor --quick          # smoke test: tiny budgets
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.anakin import Measurement, agent_config, measure_training
from benchmarks.harness import (
    configure_cpu_devices,
    dispatch,
    emit_result,
    finish,
    fmt,
    interleave,
    load_note,
    loads_of,
    median_of,
    new_parser,
    run_child,
    spread_of,
    table,
)

MODULE = "benchmarks.mesh_floor"
NUM_ENVS, ROLLOUT = 4, 128
SIZES = (1, None, 100_000)  # None: the PPO params' size


def ppo_param_count() -> int:
    import jax

    from podrl.agents.ppo.config import PPOConfig
    from podrl.envs.registry import make
    from podrl.envs.types import env_spec

    spec = env_spec(make("CartPole-v1"))
    params = PPOConfig().make_agent(spec, 10).init(jax.random.key(0), spec).params
    return sum(x.size for x in jax.tree.leaves(params))


def measure_latency(devices: int, sizes: list[int], iterations: int) -> dict[str, Any]:
    """Microseconds per `pmean` step (a scan of `iterations`) for each size, on `devices` devices."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((devices,), ("d",), devices=jax.devices()[:devices])
    out = {}
    for size in sizes:
        def chain(x):
            def body(c, _):
                return jax.lax.pcast(jax.lax.pmean(c * 1.0001, "d"), "d", to="varying"), None
            return jax.lax.scan(body, x, None, iterations)[0]

        run = jax.jit(jax.shard_map(chain, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
        x = jax.device_put(jnp.ones((devices * size,), jnp.float32), NamedSharding(mesh, P("d")))
        compiled = run.lower(x).compile()
        jax.block_until_ready(compiled(x))
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            jax.block_until_ready(compiled(x))
            best = min(best, time.perf_counter() - start)
        out[str(size)] = best / iterations * 1e6
    return out


def count_all_reduces(total_steps: int) -> dict[str, Any]:
    """All-reduce thunks per update per device, from a trace of the 2-device train call."""
    from podrl.anakin import train_anakin
    from podrl.anakin.config import AnakinConfig
    from podrl.run.config import LoggingConfig
    from podrl.run.profiling import PROGRAM_TEXT, find_trace, summarize_trace

    updates_per_call = 2
    with tempfile.TemporaryDirectory() as trace:
        config = AnakinConfig(env="CartPole-v1", total_steps=total_steps, num_envs=NUM_ENVS, rollout_length=ROLLOUT,
                              num_devices=2, updates_per_call=updates_per_call, eval_every=0, eval_episodes=0,
                              logging=LoggingConfig(run_dir=None, console=False, profile=trace))
        train_anakin(config, agent_config(Measurement("podrl", 2, NUM_ENVS, ROLLOUT, total_steps, anneal_lr=False)))
        summary = summarize_trace(find_trace(trace), Path(trace, PROGRAM_TEXT).read_text())
    all_reduces = sum(n for kind, n in summary["collectives"].items() if kind.startswith("all-reduce"))
    return {"all_reduces_per_update": all_reduces / (updates_per_call * 2), "collectives": summary["collectives"]}


def child_main(spec_json: str) -> int:
    """Child entry point: one measurement (`what`: latency, count or train), printed as one result line."""
    spec = json.loads(spec_json)
    configure_cpu_devices(spec["devices"])
    if spec["what"] == "latency":
        sizes = [size or ppo_param_count() for size in SIZES]
        emit_result({"sizes": sizes, "microseconds": measure_latency(spec["devices"], sizes, spec["iterations"])})
    elif spec["what"] == "count":
        emit_result(count_all_reduces(spec["total_steps"]))
    else:
        result = measure_training(Measurement("podrl", spec["devices"], NUM_ENVS, ROLLOUT, spec["total_steps"],
                                              anneal_lr=False))
        emit_result({"steps_per_second": result["steps_per_second"], "compile_seconds": result["compile_seconds"]})
    return 0


def parse_args(argv: list[str] | None = None):
    parser = new_parser(__doc__, quick="tiny budgets (smoke test; numbers meaningless)", repeats=3,
                        repeats_help="training runs per device count, interleaved (median reported)", timeout=600.0,
                        child=True)
    return parser.parse_args(argv)


def run(args, start: float) -> int:
    """The parent: the latencies, the all-reduce count and the interleaved training runs; the report."""
    total_steps = NUM_ENVS * ROLLOUT * (8 if args.quick else 977)
    iterations = 50 if args.quick else 2000
    latency = {d: run_child(MODULE, {"what": "latency", "devices": d, "iterations": iterations}, args.timeout)
               for d in (1, 2)}
    count = run_child(MODULE, {"what": "count", "devices": 2, "total_steps": NUM_ENVS * ROLLOUT * 4}, args.timeout)

    def train(devices: int, _) -> dict[str, Any]:
        return run_child(MODULE, {"what": "train", "devices": devices, "total_steps": total_steps}, args.timeout)

    runs = dict(zip((1, 2), interleave((1, 2), args.repeats, train, lambda d: f"train devices={d}")))
    rows = [latency[1], latency[2], count] + runs[1] + runs[2]
    report = analyse(latency, count, runs)
    return finish("mesh_floor", args, rows, markdown(report, loads_of(rows)), start,
                  config=f"CartPole-v1 PPO {NUM_ENVS}x{ROLLOUT}", **report)


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


def analyse(latency: dict[int, dict[str, Any]], count: dict[str, Any],
            runs: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """The report's numbers: latencies, all-reduces per update, the collective floor and the observed gap."""
    sizes = latency[1].get("sizes") or latency[2].get("sizes") or []
    micro = {d: latency[d].get("microseconds", {}) for d in (1, 2)}
    sps = {d: median_of(runs[d], "steps_per_second") for d in (1, 2)}
    ms_per_update = {d: (NUM_ENVS * ROLLOUT / sps[d] * 1e3 if sps[d] else None) for d in (1, 2)}
    per_update = count.get("all_reduces_per_update")
    params = str(sizes[1]) if len(sizes) > 1 else None
    extra = (micro[2][params] - micro[1][params]) if params and params in micro[1] and params in micro[2] else None
    floor = per_update * extra / 1e3 if per_update is not None and extra is not None else None
    gap = ms_per_update[2] - ms_per_update[1] if None not in ms_per_update.values() else None
    return {"sizes": sizes, "latency_us": {str(d): micro[d] for d in (1, 2)},
            "all_reduces_per_update": per_update, "collectives": count.get("collectives"),
            "steps_per_second": {str(d): sps[d] for d in (1, 2)},
            "steps_per_second_spread": {str(d): spread_of(runs[d], "steps_per_second") for d in (1, 2)},
            "ms_per_update": {str(d): ms_per_update[d] for d in (1, 2)},
            "collective_floor_ms_per_update": floor, "observed_gap_ms_per_update": gap,
            "errors": [r["error"] for r in (latency[1], latency[2], count, *runs[1], *runs[2]) if "error" in r]}


def markdown(report: dict[str, Any], loads: list[float]) -> str:
    sizes = report["sizes"]
    names = {0: "1 float", 1: "PPO params", 2: "100k floats"}
    cells = ([names.get(i, ""), f"{size:,}", *(fmt(report["latency_us"][d].get(str(size)), ".1f") for d in "12")]
             for i, size in enumerate(sizes))
    latency = table(["all-reduce of", ">floats", ">1 device, us", ">2 devices, us"], cells)
    train = table([f"PPO {NUM_ENVS}x{ROLLOUT}", ">1 device", ">2 devices"],
                  [["run-only steps/s", *(fmt(report["steps_per_second"][d], ",.0f") for d in "12")],
                   ["ms per update", *(fmt(report["ms_per_update"][d], ".2f") for d in "12")]])
    lines = [latency, "", train, "",
             f"All-reduces per update on each device: {fmt(report['all_reduces_per_update'], '.1f')}. "
             f"Their floor on a 2-device update (count x extra latency at the params' size): "
             f"{fmt(report['collective_floor_ms_per_update'], '.2f')} ms; observed gap (2 devices - 1): "
             f"{fmt(report['observed_gap_ms_per_update'], '.2f')} ms per update." + load_note(loads)]
    if report["errors"]:
        lines.append("\nErrors: " + "; ".join(e.splitlines()[0] for e in report["errors"]))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
