"""Benchmark the Anakin layout: env steps/s and compile seconds, 1 device vs a CPU mesh.

Rows (each measured in its own subprocess, so each gets its own JAX device count):
  a_reference   PPO on CartPole-v1, 4 envs x 128 steps, 4 epochs x 4 minibatches,
                500k steps (AnakinConfig + PPOConfig defaults, eval_every=0).
  b_throughput  the same PPO with 2048 envs x 16 steps (--throughput-steps, default 4M).
                With --agents ppo,pqn (any names registered in agents.AGENTS) rows a and b
                are run for each agent in turn, with that agent's config defaults (and
                `torso` / `anneal_lr` where the config has them).
  c_env_only    the ceiling: the same JAX CartPole (wrap_for_training) with random
                actions and no network, vmapped over 4 and 2048 envs, `lax.scan` over
                time inside one jit(shard_map(...)) over `podrl.core.mesh.data_mesh`.
  d_population  (with --population-rows) the reference PPO as a population of 1, 8 and 32
                members (an lr sweep, loguniform 1e-4..3e-3), total steps/s over all members;
                members split over the devices (population_shards = gcd(members, devices)),
                each member's steps are 500k / members (at least 16 updates).
Each row is run on every device count of --devices (on CPU, the host is split into
that many JAX devices with `jax_num_cpu_devices`). Training steps/s count training
calls only (compile excluded); env-only steps/s are measured after an ahead-of-time
`.lower().compile()`, whose seconds are the compile figure.

The table gives, on env-only rows, the fraction of the env ceiling that training reaches.
For podrl against a peer (rejax's PPO) timed in the same run, see benchmarks/peer_ppo.py;
no row here is compared with a figure from another run. Nothing is asserted about timings.

Usage:
  python -m benchmarks.anakin                                   # full run, 1 and 2 devices
  python -m benchmarks.anakin --out bench.json --repeats 3      # median of 3 runs per row
  python -m benchmarks.anakin --devices 1 2 4 --throughput-steps 4000000
  python -m benchmarks.anakin --agents ppo,pqn                  # training rows for PPO and PQN
  python -m benchmarks.anakin --quick --out /tmp/smoke.json     # tiny smoke test
  python -m benchmarks.anakin --population-rows                 # adds the population rows

The training and env-only measurements (`Measurement`, `measure_training`, `measure_env_only`) and
`measure_all` serve benchmarks.minatar, benchmarks.brax, benchmarks.mesh_floor and
benchmarks.peer_ppo too: their children run this module's `--child`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any

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
    ok_runs,
    run_child,
    spread_of,
    table,
)

MODULE = "benchmarks.anakin"
"""The module whose `--child` runs a `Measurement` (this one, also for the benchmarks that reuse it)."""

TRAIN_ROWS = ("a_reference", "b_throughput", "d_population")
POPULATION_SIZES = (1, 8, 32)
ENV_NAME = "CartPole-v1"


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One benchmark row: what runs, on how many devices, for how many env steps."""

    name: str  # a_reference | b_throughput | c_env_only (benchmarks.minatar: ppo | env_only)
    devices: int
    num_envs: int
    rollout_length: int  # steps per env between updates; env-only: a compiled chunk scans
    # updates_per_call * rollout_length steps, as many as one training call
    total_steps: int
    updates_per_call: int = 32
    min_seconds: float = 0.0  # env-only: keep stepping at least this long
    env: str = ENV_NAME  # an `podrl.envs.make` name
    torso: str = "mlp"  # the PPO torso (`--agent.torso`)
    num_seeds: int = 1  # training: seeds vmapped in one program
    anneal_lr: bool = True  # training: PPO's learning-rate anneal
    eval_episodes: int = 0  # training: episodes of the final (untimed) evaluation; 0 = none (no eval compile)
    agent: str = "ppo"  # training: a name in agents.AGENTS, trained with its config defaults
    population: int = 0  # training: population members (an lr sweep) instead of seeds; 0 = none
    hidden_sizes: tuple[int, ...] | None = None  # training: the MLP's hidden sizes; None = the agent's default
    agent_fields: dict[str, Any] | None = None  # training: more agent-config fields (a preset's, benchmarks.brax)

    @property
    def is_training(self) -> bool:
        return not self.name.endswith("env_only")


# ---------------------------------------------------------------- child side


def agent_config(m: Measurement) -> Any:
    """The config of agent `m.agent` (its defaults), with `m.torso`, `m.anneal_lr` and
    `m.hidden_sizes` (when given) set on the fields of those names that it has."""
    from podrl.agents import AGENTS

    cls = AGENTS[m.agent].config
    names = {f.name for f in dataclasses.fields(cls)}
    fields = (("torso", m.torso), ("anneal_lr", m.anneal_lr), ("hidden_sizes", m.hidden_sizes))
    extra = {k: tuple(v) if isinstance(v, list) else v for k, v in (m.agent_fields or {}).items()}  # JSON lists
    return cls(**{**{k: v for k, v in fields if k in names and v is not None}, **extra})


def measure_training(m: Measurement) -> dict[str, Any]:
    """Trains `m.agent` with `train_anakin`; returns its steps/s and compile seconds."""
    import numpy as np

    from podrl.anakin import train_anakin
    from podrl.anakin.config import AnakinConfig
    from podrl.run.config import LoggingConfig

    config = AnakinConfig(
        env=m.env, total_steps=m.total_steps, num_envs=m.num_envs, rollout_length=m.rollout_length,
        num_seeds=m.num_seeds, num_devices=m.devices, updates_per_call=m.updates_per_call, eval_every=0,
        eval_episodes=m.eval_episodes,  # the one final evaluation is not timed; none by default
        logging=LoggingConfig(run_dir=None, console=False), **population_fields(m),
    )
    result = train_anakin(config, agent_config(m))
    final_return = result.final_eval_return
    return {
        "steps_per_second": float(result.steps_per_second),
        "compile_seconds": float(result.compile_seconds),
        "steps_measured": config.num_updates * config.steps_per_update,
        "final_eval_return": None if final_return is None else float(np.mean(final_return)),
        "stages": result.stages,  # where the seconds from process start went (podrl.run.stages)
    }


def build_env_only(num_envs: int, devices: int, scan_length: int, env_name: str = ENV_NAME):
    """(init, chunk, env_steps_per_chunk): random-action `env_name` over a `data_mesh` (uniform over a
    discrete action set, or uniform in a continuous action's bounds).

    `init(seed)` returns the sharded carry (env states `[E]`, one key per shard,
    reward sums `[E]`); `chunk` (a `jit(shard_map)`) steps it `scan_length` times.
    """
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import podrl.envs
    from podrl.core.mesh import data_mesh, local_devices
    from podrl.core.parallel import DATA_AXIS, match_varying

    env = podrl.envs.wrap_for_training(podrl.envs.make(env_name))
    random_actions = random_action_fn(env.action_spec())
    mesh = data_mesh(local_devices(devices))
    sharded = NamedSharding(mesh, P(DATA_AXIS))

    def shard_chunk(env_state, key, reward_sum):
        def step(carry, _):
            state, k, rewards = carry
            k, action_key = jax.random.split(k)
            actions = random_actions(action_key, rewards.shape)
            state, ts = jax.vmap(env.step)(state, actions)
            return match_varying((state, k, rewards + ts.reward), carry), None

        (env_state, k, reward_sum), _ = jax.lax.scan(step, (env_state, key[0], reward_sum), None, scan_length)
        return env_state, k[None], reward_sum

    spec = P(DATA_AXIS)
    chunk = jax.jit(jax.shard_map(shard_chunk, mesh=mesh, in_specs=spec, out_specs=spec), donate_argnums=(0, 1, 2))
    reset = jax.jit(jax.vmap(env.reset), out_shardings=sharded)

    def init(seed: int):
        reset_key, action_key = jax.random.split(jax.random.key(seed))
        env_state, _ = reset(jax.random.split(reset_key, num_envs))
        keys = jax.device_put(jax.random.split(action_key, devices), sharded)
        return env_state, keys, jax.device_put(jnp.zeros((num_envs,), jnp.float32), sharded)

    return init, chunk, num_envs * scan_length


def random_action_fn(spec: Any):
    """`(key, batch_shape) -> actions`: uniform over `spec`'s actions (a DiscreteArray's values, or a
    BoundedArray's box)."""
    import jax
    import jax.numpy as jnp

    if hasattr(spec, "num_values"):
        return lambda key, batch: jax.random.randint(key, batch, 0, spec.num_values)
    low, high = jnp.asarray(spec.minimum, jnp.float32), jnp.asarray(spec.maximum, jnp.float32)
    return lambda key, batch: jax.random.uniform(key, batch + tuple(spec.shape), minval=low, maxval=high)


def population_fields(m: Measurement) -> dict[str, Any]:
    """AnakinConfig fields of a population row: `m.population` members with an lr sweep, split over devices."""
    import math

    if not m.population:
        return {}
    return {"population": m.population, "population_shards": math.gcd(m.population, m.devices),
            "sweep": ("agent.learning_rate=loguniform:1e-4:3e-3",)}


def measure_env_only(m: Measurement) -> dict[str, Any]:
    """Steps/s of the random-action env after an AOT compile (timed separately)."""
    import jax

    init, chunk, steps_per_chunk = build_env_only(m.num_envs, m.devices, m.updates_per_call * m.rollout_length, m.env)
    carry = init(0)
    start = time.perf_counter()
    compiled = chunk.lower(*carry).compile()
    compile_seconds = time.perf_counter() - start
    carry = jax.block_until_ready(compiled(*carry))  # warm-up call, not timed
    steps, start = 0, time.perf_counter()
    while steps < m.total_steps or time.perf_counter() - start < m.min_seconds:
        carry = jax.block_until_ready(compiled(*carry))
        steps += steps_per_chunk
    seconds = time.perf_counter() - start
    return {
        "steps_per_second": steps / seconds,
        "compile_seconds": compile_seconds,
        "steps_measured": steps,
        "mean_reward_sum": float(carry[2].mean()),  # keeps the work observable
    }


def child_main(spec_json: str) -> int:
    """Child entry point: one measurement, printed as one RESULT_PREFIX line."""
    m = Measurement(**json.loads(spec_json))
    configure_cpu_devices(m.devices)
    emit_result(measure_training(m) if m.is_training else measure_env_only(m))
    return 0


# ---------------------------------------------------------------- parent side


def plan(args: argparse.Namespace) -> list[Measurement]:
    """Every row of the benchmark, in the order it runs."""
    if args.quick:
        ref_steps, tp_steps, min_seconds = 4 * 128 * 2, 2048 * 16, 0.0
    else:
        ref_steps, tp_steps, min_seconds = 500_000, args.throughput_steps, args.env_min_seconds
    rows = []
    for agent in args.agents:
        for devices in args.devices:
            rows.append(Measurement("a_reference", devices, 4, 128, ref_steps, agent=agent))
            rows.append(Measurement("b_throughput", devices, 2048, 16, tp_steps, agent=agent))
    for devices in args.devices if args.population_rows else ():
        for members in POPULATION_SIZES:
            steps = max(4 * 128 * (2 if args.quick else 16), ref_steps // members)
            rows.append(Measurement("d_population", devices, 4, 128, steps, population=members))
    for devices in args.devices:
        rows.append(Measurement("c_env_only", devices, 4, 128, ref_steps, min_seconds=min_seconds))
        rows.append(Measurement("c_env_only", devices, 2048, 16, tp_steps, min_seconds=min_seconds))
    return rows


def describe(m: Measurement) -> dict[str, Any]:
    """The `config` field of a row."""
    if m.is_training:
        config = agent_config(m)
        return {"env": m.env, "agent": m.agent, "torso": m.torso, "num_epochs": getattr(config, "num_epochs", None),
                "num_minibatches": getattr(config, "num_minibatches", None), "total_steps": m.total_steps,
                "updates_per_call": m.updates_per_call, "eval_every": 0, **population_fields(m),
                **({"agent_fields": m.agent_fields} if m.agent_fields else {})}
    return {"env": m.env, "actions": "uniform random", "network": None,
            "scan_length": m.updates_per_call * m.rollout_length,
            "min_total_steps": m.total_steps, "min_seconds": m.min_seconds}


def summarize(m: Measurement, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row: the medians over `runs` of `m`, with every raw run kept."""
    ok = ok_runs(runs)
    row = {
        "name": m.name, "config": describe(m), "devices": m.devices,
        "num_envs": m.num_envs, "rollout_length": m.rollout_length,
        "steps_per_second": median_of(ok, "steps_per_second"),
        "steps_per_second_spread": spread_of(ok, "steps_per_second"),
        "compile_seconds": median_of(ok, "compile_seconds"),
        "runs": runs,
    }
    if not ok:
        row["error"] = runs[-1]["error"]
    return row


def measure_all(plan_: list[Measurement], repeats: int, timeout: float) -> list[dict[str, Any]]:
    """Runs every measurement `repeats` times in child processes, interleaved (rows inner, repeats outer);
    one summarized row per measurement."""
    runs = interleave(plan_, repeats, lambda m, _: run_child(MODULE, dataclasses.asdict(m), timeout),
                      lambda m: f"{m.name:13s} {m.agent if m.is_training else '':6s} devices={m.devices} "
                                f"envs={m.num_envs:5d}")
    return [summarize(m, row_runs) for m, row_runs in zip(plan_, runs)]


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """Env-only rows: `training_fraction_of_ceiling` (training steps/s of the first agent of
    --agents at the same envs and devices; population rows excluded)."""
    training: dict[tuple[int, int], dict[str, Any]] = {}
    for r in rows:
        if r["name"] in TRAIN_ROWS and "population" not in r["config"]:
            training.setdefault((r["num_envs"], r["devices"]), r)
    for row in rows:
        sps = row["steps_per_second"]
        if row["name"] in TRAIN_ROWS:
            continue
        train = training.get((row["num_envs"], row["devices"]))
        train_sps = train["steps_per_second"] if train else None
        row["training_fraction_of_ceiling"] = train_sps / sps if (train_sps and sps) else None


# ---------------------------------------------------------------- report


CAPTION = (
    "train/ceiling (env-only rows) = training steps/s (of the first agent listed) / env-only steps/s "
    "at the same env count and devices, from this run. Compile = AOT compile of the train call "
    "(env-only: of the scan chunk). "
    "podrl against a peer measured in the same run: benchmarks/peer_ppo.py."
)


def table_cells(r: dict[str, Any]) -> list[str]:
    """One row's cells of the markdown table."""
    return [
        r["name"] + (f" ({r['config']['population']} members)" if "population" in r["config"] else ""),
        str(r["devices"]), r["config"].get("agent") or "", f"{r['num_envs']} x {r['rollout_length']}",
        fmt(r["steps_per_second"], ",.0f") if "error" not in r else "FAILED",
        fmt(r["compile_seconds"], ".2f"),
        "" if r["name"] in TRAIN_ROWS else fmt(r.get("training_fraction_of_ceiling"), ".1%"),
    ]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table with its caption."""
    text = table(["row", ">devices", "agent", "envs x steps", ">steps/s", ">compile s", ">train/ceiling"],
                 map(table_cells, rows))
    return text + "\n\n" + CAPTION + load_note(loads_of(run for r in rows for run in r["runs"]))


def agent_names(text: str) -> tuple[str, ...]:
    """`"ppo,pqn"` -> `("ppo", "pqn")`; argparse error for a name not in agents.AGENTS."""
    from podrl.agents import AGENTS

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in AGENTS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown agent(s) {unknown or text!r}; expected names from {sorted(AGENTS)}")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = new_parser(__doc__, quick="tiny step counts (smoke test, numbers meaningless)", repeats=1,
                        timeout=900.0, child=True)
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2], help="device counts to run each row on")
    parser.add_argument("--throughput-steps", type=int, default=4_000_000, help="total env steps of row (b)")
    parser.add_argument("--population-rows", action="store_true",
                        help="add d_population rows: PPO populations of 1, 8 and 32 members")
    parser.add_argument("--env-min-seconds", type=float, default=1.0, help="env-only rows step at least this long")
    parser.add_argument("--agents", type=agent_names, default=("ppo",),
                        help="comma-separated agents (names in agents.AGENTS) whose training rows are measured")
    args = parser.parse_args(argv)
    if args.repeats < 1 or any(d < 1 for d in args.devices):
        parser.error("--repeats and --devices must be positive")
    return args


def run(args: argparse.Namespace, start: float) -> int:
    """The parent: every row measured, the table printed, the document written."""
    rows = measure_all(plan(args), args.repeats, args.timeout)
    add_ratios(rows)
    return finish("anakin", args, rows, markdown_table(rows), start)


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


if __name__ == "__main__":
    sys.exit(main())
