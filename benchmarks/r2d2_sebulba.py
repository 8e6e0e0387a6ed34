"""R2D2 in Sebulba: env steps/s and learner sequences/s against actor threads, and the replay's bytes.

Each point trains `minatar-r2d2`'s agent (the preset's fields; `min_fill` lowered to one sequence of
each env, so learning runs from the first update) with `train_sebulba` on 2 CPU JAX devices: actor
device 0 (`threads` actor threads of `envs_per_thread` host envs each), learner device 1, lag 1, no
evaluation, logging off. Per point:

- steps/s: `SebulbaResult.steps_per_second` (env steps the learner consumed per second, compile excluded);
- learner sequences/s: the update's gradient steps x `batch_size` sequences over the mean
  'time/learner_step_s' of the log windows after the first (one window when there is only one);
- the stage times per update ('time/env_step_s', 'time/inference_s', 'time/learner_step_s') and the mean lag.

The replay's bytes: per stored sequence (its `sequence_period` steps, its stored core state and its two
sum-tree floats) and per replayed window (the `burn_in + sequence_length` steps a draw reads), from the
shard state's shapes (`podrl.core.learner_state.shard_state_bytes`).

    python -m benchmarks.r2d2_sebulba                                  # gymnax Breakout-MinAtar, 1 and 2 threads
    python -m benchmarks.r2d2_sebulba --threads 1 2 4 --updates 24 --out r2d2.json
    python -m benchmarks.r2d2_sebulba --threads 1 --quick                 # smoke test
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from benchmarks.harness import configure_cpu_devices, finish, fmt, load_note, loads_of, new_parser, table


def replay_bytes(config, spec) -> dict[str, float]:
    """Bytes per stored sequence and per replayed window of `config`'s replay on `spec`."""
    import jax

    from podrl.agents.r2d2.agent import example_step
    from podrl.agents.replay import item_bytes
    from podrl.core.learner_state import shard_state_bytes

    agent = config.make_agent(spec, 1)
    sequences = config.buffer_size // config.sequence_period
    step = item_bytes(example_step(spec))
    state = jax.eval_shape(agent.init, jax.random.key(0), spec).shard_state
    return {"step": step, "stored_sequence": shard_state_bytes(agent, spec) / sequences,
            "start_state": item_bytes(jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype),
                                                   state.start_state)),
            "replayed_window": step * config.window}


def measure(env: str, threads: int, envs_per_thread: int, updates: int, agent_config) -> dict[str, float]:
    """One training run; its figures (module docstring)."""
    import numpy as np

    from podrl.run.config import LoggingConfig
    from podrl.sebulba import SebulbaConfig, train_sebulba

    config = SebulbaConfig(env=env, threads_per_actor_device=threads, envs_per_thread=envs_per_thread,
                           rollout_length=16, total_steps=threads * envs_per_thread * 16 * updates,
                           actor_devices=(0,), learner_devices=(1,), lag="1", log_every=max(1, updates // 4),
                           eval_episodes=0, logging=LoggingConfig(run_dir=None, console=False))
    result = train_sebulba(config, agent_config)
    steady = result.history[1:] or result.history
    stage = {k: float(np.mean([r[k] for r in steady])) for k in ("time/env_step_s", "time/inference_s",
                                                                 "time/learner_step_s")}
    per_update = agent_config.sgd_steps(16, threads * envs_per_thread) * agent_config.batch_size
    return {"threads": threads, "envs_per_thread": envs_per_thread, "steps_per_second": result.steps_per_second,
            "learner_sequences_per_second": per_update / stage["time/learner_step_s"],
            "policy_lag_mean": float(np.mean([r["policy_lag_mean"] for r in steady])),
            "compile_seconds": result.compile_seconds, **stage}


QUICK_UPDATES = 3


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The harness's shared flags (--out, --quick, --note) and this benchmark's."""
    parser = new_parser(__doc__, quick=f"{QUICK_UPDATES} updates per point (smoke test, numbers meaningless)")
    parser.add_argument("--env", default="gymnax:Breakout-MinAtar")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--envs-per-thread", type=int, default=16)
    parser.add_argument("--updates", type=int, default=16)
    return parser.parse_args(argv)


def report(env: str, envs_per_thread: int, rows: list[dict], replay: dict[str, float]) -> str:
    """The markdown table of `rows`, the replay's bytes and the host load."""
    lines = table((">actor threads", ">env steps/s", ">learner sequences/s", ">env s/update", ">inference s/update",
                   ">learner s/update"),
                  ((r["threads"], fmt(r["steps_per_second"], ",.0f"), fmt(r["learner_sequences_per_second"], ",.0f"),
                    fmt(r["time/env_step_s"], ".3f"), fmt(r["time/inference_s"], ".3f"),
                    fmt(r["time/learner_step_s"], ".3f")) for r in rows))
    return (f"R2D2 Sebulba on {env}, {envs_per_thread} envs per thread, minatar-r2d2's agent, lag 1\n\n{lines}\n\n"
            f"replay: {replay['step']:.0f} bytes per step, {replay['stored_sequence']:,.0f} per stored sequence (incl. "
            f"its {replay['start_state']:.0f}-byte core state), {replay['replayed_window']:,.0f} per replayed window."
            + load_note(loads_of(rows)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    configure_cpu_devices(2)
    from podrl.agents.r2d2 import R2D2Config
    from podrl.cli.presets import PRESETS
    from podrl.envs.adapters.make import make_host_env
    from podrl.envs.types import EnvSpec

    fields = dict(PRESETS["minatar-r2d2"].agent_fields)
    updates = QUICK_UPDATES if args.quick else args.updates
    rows = []
    for threads in args.threads:
        columns = threads * args.envs_per_thread
        config = R2D2Config(**{**fields, "min_fill": (fields["burn_in"] + fields["sequence_length"]) * columns})
        rows.append({**measure(args.env, threads, args.envs_per_thread, updates, config),
                     "load_1m": os.getloadavg()[0]})
    host = make_host_env(args.env, 1)
    spec = EnvSpec(host.observation_spec(), host.action_spec())
    host.close()
    replay = replay_bytes(config, spec)
    return finish("r2d2_sebulba", args, rows, report(args.env, args.envs_per_thread, rows, replay), start,
                  env=args.env, envs_per_thread=args.envs_per_thread, updates=updates, replay_bytes=replay)


if __name__ == "__main__":
    sys.exit(main())
