"""Benchmark XLA:CPU's compile time and run time of podrl's train calls under different XLA_FLAGS.

For each set of compiler flags (`--flags=VALUE`, repeated), a fresh child process (one CPU device,
the persistent compilation cache off) builds the Anakin train call of each agent (PPO and DQN on
CartPole-v1, MuZero with 4 simulations on MatchCue-v0; 8 envs x 16 steps, 2 updates per call) and
times its ahead-of-time compile (trace, lower, XLA): the process's CPU seconds (all threads) and wall
seconds. Then it runs the compiled call `--calls` times and reports env steps per second. Nothing is
asserted. The sets run interleaved (A B A B ...), medians of --repeats. The default sets are the test
suite's flags without and with XLA:CPU's classic loop emitters (tests/conftest.py), the second only where
this XLA knows the flag (jaxlib <= 0.10, `podrl.core.compat`).

Usage:
  python -m benchmarks.compile_flags --out compile_flags.json
  python -m benchmarks.compile_flags --flags= --flags=--xla_cpu_use_fusion_emitters=false --repeats 3
  python -m benchmarks.compile_flags --quick   # smoke test: PPO only, 1 repeat, 2 calls
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from benchmarks.harness import (
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
    table,
)
from podrl.core.compat import CLASSIC_EMITTERS, xla_knows

MODULE = "benchmarks.compile_flags"
LEVEL_1 = "--xla_backend_optimization_level=1"
DEFAULT_FLAGS = [LEVEL_1, f"{LEVEL_1} {CLASSIC_EMITTERS}"]
"""The default sets; `default_flags` leaves out those this XLA does not know."""
AGENTS = ("ppo", "dqn", "muzero")
NUM_ENVS, ROLLOUT, UPDATES_PER_CALL = 8, 16, 2


def parse_args(argv: list[str] | None):
    parser = new_parser(__doc__, quick="PPO only, 1 repeat, 2 calls (a smoke test)", repeats=2, timeout=600.0,
                        child=True)
    parser.add_argument("--flags", action="append", help="XLA_FLAGS of one set, written --flags=VALUE (XLA's "
                        "flags start with --); repeat it for each set (default: the test suite's two sets)")
    parser.add_argument("--agents", nargs="+", choices=AGENTS, default=list(AGENTS))
    parser.add_argument("--calls", type=int, default=20, help="timed train calls after the compile")
    args = parser.parse_args(argv)
    args.flags = args.flags or default_flags()
    if args.quick:
        args.agents, args.repeats, args.calls = ["ppo"], 1, 2
    return args


def default_flags() -> list[str]:
    """DEFAULT_FLAGS without the classic emitters where this XLA does not know them (an unknown flag aborts)."""
    return [flags for flags in DEFAULT_FLAGS if CLASSIC_EMITTERS not in flags or xla_knows(CLASSIC_EMITTERS)]


def _agent(name: str):
    """(env, agent config) of one row."""
    if name == "ppo":
        from podrl.agents.ppo import PPOConfig
        return "CartPole-v1", PPOConfig()
    if name == "dqn":
        from podrl.agents.dqn import DQNConfig
        return "CartPole-v1", DQNConfig()
    from podrl.agents.muzero import MuZeroConfig
    return "MatchCue-v0", MuZeroConfig(num_simulations=4)


def measure(name: str, calls: int) -> dict[str, Any]:
    """One agent's train call in this process: compile CPU and wall seconds, then env steps per second
    over `calls` calls of the compiled program."""
    import jax

    from podrl.anakin import setup
    from podrl.anakin.config import AnakinConfig

    env, agent = _agent(name)
    config = AnakinConfig(env=env, num_envs=NUM_ENVS, rollout_length=ROLLOUT, updates_per_call=UPDATES_PER_CALL,
                          total_steps=NUM_ENVS * ROLLOUT * UPDATES_PER_CALL * (calls + 1))
    compiled = setup.build(config, agent, devices=jax.devices()[:1]).compiled
    state = compiled.init()
    cpu = time.process_time()
    compile_wall = compiled.compile(state)  # trace, lower, XLA compile
    compile_cpu = time.process_time() - cpu
    state, _ = compiled.train_call(state, 0)  # warm-up call
    jax.block_until_ready(state)
    wall = time.perf_counter()
    for call in range(calls):
        state, _ = compiled.train_call(state, (call + 1) * UPDATES_PER_CALL)
    jax.block_until_ready(state)
    seconds = time.perf_counter() - wall
    return {"compile_cpu_seconds": compile_cpu, "compile_seconds": compile_wall,
            "steps_per_second": calls * UPDATES_PER_CALL * NUM_ENVS * ROLLOUT / seconds}


def child_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    os.environ["XLA_FLAGS"] = spec["flags"]  # before JAX starts its backend
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    emit_result({name: measure(name, spec["calls"]) for name in spec["agents"]})
    return 0


def run(args, start: float) -> int:
    def one(flags: str, _repeat: int) -> dict[str, Any]:
        return run_child(MODULE, {"flags": flags, "agents": args.agents, "calls": args.calls}, args.timeout)

    runs = interleave(args.flags, args.repeats, one, lambda flags: f"flags={flags!r}")
    rows = []
    for flags, flag_runs in zip(args.flags, runs):
        errors = [r["error"] for r in flag_runs if "error" in r]
        for name in args.agents:
            agent_runs = [r[name] for r in flag_runs if name in r]
            row = {"flags": flags, "agent": name, **{key: median_of(agent_runs, key) for key in
                                                      ("compile_cpu_seconds", "compile_seconds", "steps_per_second")},
                   "runs": agent_runs}
            rows.append({**row, "error": errors[0]} if errors else row)
    lines = [(f"`{r['flags'] or '(none)'}`", r["agent"], fmt(r["compile_cpu_seconds"], ".2f"),
              fmt(r["compile_seconds"], ".2f"), fmt(r["steps_per_second"], ",.0f")) for r in rows]
    loads = loads_of(r for flag_runs in runs for r in flag_runs)
    text = (table(["XLA_FLAGS", "agent", ">compile CPU s", ">compile wall s", ">steps/s"], lines) +
            f"\n\nMedians of {args.repeats} run(s) per set, interleaved; one CPU device, "
            f"{NUM_ENVS} envs x {ROLLOUT} steps, {UPDATES_PER_CALL} updates per call.{load_note(loads)}")
    return finish("compile_flags", args, rows, text, start)


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


if __name__ == "__main__":
    sys.exit(main())
