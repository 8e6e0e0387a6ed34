"""What it costs an actor thread to hand one rollout to the learner device: stacked step records vs
the aligned rollout buffer.

For each env's trajectory layout (the fields and dtypes an actor records: `podrl.sebulba.transport`),
one rollout of `--envs` envs x `--length` steps with random contents is handed over two ways, in
one process on 2 CPU JAX devices (the learner is device 1), alternating, `--repeats` times each:

  stacked   what the actor loop did before issue 39: `T` one-step records (fresh numpy arrays)
            stacked with `transport.stack_rollout`, then `place_on_learners` (numpy's default
            16-byte alignment: XLA:CPU copies it)
  fresh     each step written into a new `transport.RolloutBuffer` as it comes (64-byte aligned
            leaves), then `place_on_learners` (XLA:CPU takes the buffer without a copy)
  recycled  the loop now: the same, into a buffer the learner handed back (`ActorPool.recycle`):
            no allocation, no first-touch page faults

Both are timed until the learner-side arrays are ready (`block_until_ready`); `handover ms` is
what the actor spends after its last step (stacking and placing); the buffers' per-step writes
are reported apart, as `writes ms` (the loop does them step by step; with `step_async` envs while
the envs step).

    python -m benchmarks.sebulba_transfer --repeats 20
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from benchmarks.harness import configure_cpu_devices, finish, fmt, new_parser, table

LAYOUTS = {"ale:Pong": ((4, 84, 84), "uint8"), "envpool:CartPole-v1": ((4,), "float32")}
"""Observation shape and dtype of each env's trajectory."""


def step_records(obs_shape, obs_dtype: str, envs: int, length: int, rng) -> list:
    """`length` one-step records of `envs` envs with PPO's extras (log_prob, value)."""
    import numpy as np

    from podrl.sebulba.transport import step_record

    def obs():
        return rng.integers(0, 255, (envs, *obs_shape)).astype(obs_dtype)

    return [step_record(obs(), rng.integers(0, 6, envs).astype(np.int32), rng.random(envs), np.ones(envs),
                        np.zeros(envs, bool), obs(), {"log_prob": rng.random(envs, np.float32),
                                                      "value": rng.random(envs, np.float32)})
            for _ in range(length)]


def handover(steps: list, shardings, example, way: str, kept) -> tuple[float, float]:
    """(seconds after the last step until the learner's arrays are ready, seconds of per-step writes);
    `kept`: the buffer "recycled" writes into."""
    import jax

    from podrl.sebulba.transport import RolloutBuffer, place_on_learners, stack_rollout

    writes = 0.0
    if way != "stacked":
        start = time.perf_counter()
        buffer, rows = kept if way == "recycled" else RolloutBuffer(example), slice(None)
        for t, s in enumerate(steps):
            buffer.write_observation(t, rows, s.observation)
            buffer.write_acted(t, rows, s.action, s.agent_extras)
            buffer.write_result(t, rows, s.reward, s.discount, s.truncated, s.next_observation)
        writes = time.perf_counter() - start
    start = time.perf_counter()
    trajectory = stack_rollout(steps, ()) if way == "stacked" else buffer.trajectory(())
    jax.block_until_ready(place_on_learners(trajectory, shardings))
    return time.perf_counter() - start, writes


def measure(env: str, envs: int, length: int, repeats: int) -> dict[str, Any]:
    import jax
    import numpy as np

    from podrl.core.mesh import data_mesh
    from podrl.sebulba.transport import example_trajectory, learner_shardings

    rng = np.random.default_rng(0)
    steps = step_records(*LAYOUTS[env], envs, length, rng)
    example = example_trajectory(steps[0], (), length)
    shardings = learner_shardings(data_mesh([jax.devices()[1]]), example)
    from podrl.sebulba.transport import RolloutBuffer

    kept = RolloutBuffer(example)
    times: dict[str, list[tuple[float, float]]] = {"stacked": [], "fresh": [], "recycled": []}
    for _ in range(repeats + 1):  # the first round warms up (and touches `kept`)
        for way in times:
            times[way].append(handover(steps, shardings, example, way, kept))
    row: dict[str, Any] = {"env": env, "envs": envs, "length": length,
                           "mbytes": sum(x.nbytes for x in jax.tree.leaves(example)) / 1e6}
    for way, runs in times.items():
        row[f"{way}_handover_ms"] = 1e3 * statistics.median(h for h, _ in runs[1:])
        row[f"{way}_writes_ms"] = 1e3 * statistics.median(w for _, w in runs[1:])
    return row


def main(argv: list[str] | None = None) -> int:
    parser = new_parser(__doc__, quick="3 repeats", repeats=10)
    parser.add_argument("--envs", type=int, default=16, help="envs per rollout")
    parser.add_argument("--length", type=int, default=32, help="steps per rollout")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    configure_cpu_devices(2)
    rows = [measure(env, args.envs, args.length, 3 if args.quick else args.repeats) for env in LAYOUTS]
    text = table(["env", ">envs x steps", ">MB", ">stacked: handover ms", ">fresh: writes ms", ">fresh: handover ms",
                  ">recycled: writes ms", ">recycled: handover ms"],
                 ([r["env"], f"{r['envs']} x {r['length']}", fmt(r["mbytes"], ".1f"),
                   fmt(r["stacked_handover_ms"], ".2f"), fmt(r["fresh_writes_ms"], ".2f"),
                   fmt(r["fresh_handover_ms"], ".2f"), fmt(r["recycled_writes_ms"], ".2f"),
                   fmt(r["recycled_handover_ms"], ".2f")] for r in rows))
    return finish("sebulba_transfer", args, rows, text, start)


if __name__ == "__main__":
    sys.exit(main())
