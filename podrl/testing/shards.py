"""`Agent.update` as the layouts run it, on any number of learner shards, and the rule they rely on.

    update = layout_update(agent, jax.devices()[:2])         # 2 learner shards
    state, metrics = update(on_shards(agent.init(key, spec), 2), trajectory, key)

`layout_update` is what Anakin's and Sebulba's learner do around `Agent.update`: one jitted
`jax.shard_map` over a data mesh (`podrl.core.parallel.DATA_AXIS`), the trajectory's batch axis
split over the shards (`podrl.core.learner_state.TRAJECTORY_SPEC`), the train state replicated but
for `shard_state` (`[D, ...]`, each shard its own), the metrics averaged by the layout
(`podrl.core.parallel.learner_metrics`), shard_map's varying-value check on.

`check_learner_shards` is the gradient rule of the house: one update on 2 learner shards that each
hold the same batch gives the train state and metrics of one update on 1 shard holding it. It
catches an update that sums its gradients over the shards (`jax.value_and_grad` of a shard's loss
with respect to the replicated params, inside shard_map, already returns the SUM over shards: the
transpose of JAX's implicit replicated-to-varying cast is a psum; typed like the mean, so nothing
at trace time tells them apart) and statistics or counters summed where they should be averaged.
A sum that Adam and a binding gradient clip normalise away entirely (both give the same step) is
invisible to it, and harmless for that update; the optimizer state (Adam's moments) still shows a
sum wherever the clip does not bind. `check_before_run` is what `train_anakin` and `train_sebulba`
run before a run with more than one learner shard on an agent that is not podrl's own.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from podrl.core.learner_state import TRAJECTORY_SPEC, broadcast_prefix, shard_global, shard_local, train_state_spec
from podrl.core.mesh import data_mesh
from podrl.core.parallel import learner_metrics
from podrl.core.types import Agent, Metrics, TrainState, Trajectory
from podrl.testing.batches import TrajectoryMaker, tiled, tiny_envs
from podrl.testing.errors import AgentCheckError

BUILTIN_PREFIX = "podrl.agents."
"""The module prefix of podrl's own agent configs (checked by podrl's tests, not before each run)."""


def layout_update(agent: Agent, devices: Sequence[jax.Device]) -> Callable[..., tuple[TrainState, Metrics]]:
    """`update(train_state, trajectory [T, D * B], key) -> (train_state, metrics)` of `agent` on D =
    len(devices) learner shards, jitted (module doc). The train state goes in and comes out as the
    layouts keep it: `shard_state` leaves `[D, ...]` (`on_shards`); every shard gets the same `key`.
    The inputs are placed on the mesh first, as the outputs come back, so a call on the outputs of the
    one before runs the same compiled program. An update whose train state JAX types as varying over
    the shards is `AgentCheckError` ("learner shards")."""

    def update(train_state, trajectory, key):
        train_state, metrics = agent.update(shard_local(train_state), trajectory, key)
        return shard_global(train_state), learner_metrics(metrics)

    mesh, spec = data_mesh(list(devices)), train_state_spec()
    specs = (spec, TRAJECTORY_SPEC, P())
    jitted = jax.jit(jax.shard_map(update, mesh=mesh, in_specs=specs, out_specs=(spec, P())))

    def placed(*args):
        shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), broadcast_prefix(specs, args),
                                 is_leaf=lambda x: isinstance(x, P))
        return _traced(jitted, *jax.device_put(args, shardings))

    return placed


def on_shards(train_state: TrainState, shards: int) -> TrainState:
    """`train_state` as `Agent.init` returns it -> as the layouts keep it on `shards` learner shards: every
    `shard_state` leaf stacked `[shards, ...]` (each shard starting from the same)."""
    stacked = jax.tree.map(lambda x: jnp.stack([x] * shards), train_state.shard_state)
    return train_state._replace(shard_state=stacked)


def of_shard(train_state: TrainState, shard: int = 0) -> TrainState:
    """The inverse of `on_shards`: learner shard `shard`'s train state, as `Agent.init` returns one."""
    return train_state._replace(shard_state=jax.tree.map(lambda x: x[shard], train_state.shard_state))


def is_builtin(agent_config: Any) -> bool:
    """Whether `agent_config` is one of podrl's own agents (its class defined under `podrl.agents`)."""
    return type(agent_config).__module__.startswith(BUILTIN_PREFIX)


def check_learner_shards(agent: Agent, state: TrainState, trajectory: Trajectory, key: jax.Array,
                         devices: Sequence[jax.Device], updates: int = 2,
                         one: Callable | None = None) -> int:
    """Raises `AgentCheckError` ("learner shards") unless `updates` updates of `state` on 2 learner shards
    that each hold `trajectory` `[T, B]` give what they give on 1 shard holding it (module doc): params,
    optimizer state, counters, shard 0's `shard_state` and the metrics. `one`: the 1-shard
    `layout_update` when already compiled. Returns how many of the updates changed the params (0: the
    rule was not exercised, e.g. a replay still filling)."""
    if len(devices) < 2:
        raise ValueError(f"the learner-shard rule needs 2 devices, got {len(devices)}")
    one = one or layout_update(agent, devices[:1])
    two = layout_update(agent, devices[:2])
    single, double, moved = on_shards(state, 1), on_shards(state, 2), 0
    both = tiled(trajectory, 2)
    for i in range(updates):
        step_key = jax.random.fold_in(key, i)
        after_one, metrics_one = one(single, trajectory, step_key)
        after_two, metrics_two = two(double, both, step_key)
        _compare(of_shard(single), of_shard(after_one), of_shard(after_two), metrics_one, metrics_two, i)
        moved += not _same(single.params, after_one.params)
        single, double = after_one, after_two
    return moved


def check_before_run(agent_config: Any, agent: Agent, env_spec: Any, rollout_length: int, learner_shards: int,
                     skip: bool, devices: Sequence[jax.Device]) -> None:
    """The front door's gradient check (`train_anakin`, `train_sebulba`): before a run with more than one
    learner shard of an agent that is not podrl's own (`is_builtin`) and unless `skip`
    (`--skip-agent-check`), `check_learner_shards` on a tiny batch (the run's `rollout_length`, the fewest
    envs `agent_config.check_batch` accepts) of observations drawn from `env_spec`, on 2 of this process's
    `devices`. Raises `AgentCheckError`; with fewer than 2 devices of this process it says it skipped."""
    if skip or learner_shards < 2 or is_builtin(agent_config):
        return
    local = [d for d in devices if d.process_index == jax.process_index()]
    if len(local) < 2:
        print(f"podrl: the learner-shard check of {type(agent_config).__name__} needs 2 devices of this process "
              f"(it has {len(local)}); skipped", file=sys.stderr)
        return
    state = jax.jit(lambda key: agent.init(key, env_spec))(jax.random.key(0))
    envs = tiny_envs(agent_config, rollout_length)
    trajectory = TrajectoryMaker(agent, env_spec, rollout_length, envs)(state.params, jax.random.key(1))
    check_learner_shards(agent, state, trajectory, jax.random.key(2), local[:2])


def _traced(update: Callable, state: TrainState, trajectory: Trajectory, key: jax.Array):
    """`update(state, trajectory, key)`; an update that leaves the state varying over the shards said as the rule."""
    try:
        return update(state, trajectory, key)
    except ValueError as e:
        if "shard_map" not in str(e) or "out_specs" not in str(e):
            raise
        raise AgentCheckError(
            "learner shards", "update returned a train state that differs between learner shards (JAX typed it "
            "as varying over the data axis): average what each shard computes from its own data, gradients "
            "with podrl.core.parallel.learner_value_and_grad and statistics with "
            "podrl.core.parallel.mean_across_learners, or keep a shard's own state in TrainState.shard_state "
            f"({_first_line(e)})") from e


def _compare(before: TrainState, one: TrainState, two: TrainState, metrics_one: Metrics, metrics_two: Metrics,
             update: int) -> None:
    for path, a, b, start in _leaves(one, two, before):
        if not np.allclose(a, b, rtol=1e-4, atol=1e-6):
            ratio = _ratio(a, b, start)
            raise AgentCheckError(
                "learner shards", f"update {update + 1} on 2 learner shards that each hold the same batch moved "
                f"train_state{path} {ratio} as far as on 1 shard: the update sums over the shards what it should "
                "average. Take gradients with podrl.core.parallel.learner_value_and_grad (jax.value_and_grad of a "
                "shard's loss inside the layout's shard_map returns their sum over the shards) and average "
                "per-shard statistics with podrl.core.parallel.mean_across_learners (--skip-agent-check, or "
                "skip_agent_check=True, runs anyway)")
    for name in sorted(set(metrics_one) | set(metrics_two)):
        a, b = metrics_one.get(name), metrics_two.get(name)
        if a is None or b is None or not np.allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6):
            raise AgentCheckError(
                "learner shards", f"metric {name!r} of update {update + 1} is {_show(b)} on 2 learner shards that "
                f"each hold the same batch but {_show(a)} on 1 shard: a metric is this shard's value (the layout "
                "averages it over the shards); do not sum it over the shards (podrl.core.parallel."
                "sum_across_learners) or scale it by their number")


def _leaves(one: TrainState, two: TrainState, before: TrainState):
    flat_one, _ = jax.tree_util.tree_flatten_with_path(one)
    flat_two, flat_before = jax.tree.leaves(two), jax.tree.leaves(before)
    for (path, a), b, start in zip(flat_one, flat_two, flat_before, strict=True):
        a, b, start = (np.asarray(jax.device_get(x)) for x in (a, b, start))
        if np.issubdtype(a.dtype, np.inexact) or np.issubdtype(a.dtype, np.integer):
            yield jax.tree_util.keystr(path), a, b, start
        elif not np.array_equal(a, b):  # bools, keys' data
            yield jax.tree_util.keystr(path), a.astype(np.float64), b.astype(np.float64), start.astype(np.float64)


def _ratio(one: np.ndarray, two: np.ndarray, start: np.ndarray) -> str:
    moved_one = np.linalg.norm((one - start).astype(np.float64).ravel())
    moved_two = np.linalg.norm((two - start).astype(np.float64).ravel())
    return f"{moved_two / moved_one:.2f} times" if moved_one > 0 else "away from where it stayed"


def _same(a: Any, b: Any) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def _show(value: Any) -> str:
    return "missing" if value is None else f"{float(np.asarray(value)):.6g}"


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0][:300]
