"""Anakin: the JAX env and the agent in one jitted program per device.

One compiled call runs `updates_per_call` updates. The mesh is 2-D, `(POPULATION_AXIS,
DATA_AXIS)` of shape `(R, D)`: the S seeds (or population members, `podrl.core.population`)
are split over the R rows, S/R per row, and each member's envs over the D devices of
its row. On every device and for each of its row's members (vmap; a lone member runs
unbatched, so the rollout's reset cond stays a cond), an update is: a `lax.scan`
rollout over the shard's envs, then `Agent.update`, whose gradients are
averaged over the row's D shards (`DATA_AXIS`), never across members or rows, as are the
metrics it returns (`podrl.core.parallel.learner_metrics`). Params
are replicated along a row; env states and PRNG keys are split over its devices.
Metrics are reduced on device inside the scan carry, so nothing of shape `[updates, ...]`
is stacked (that froze vmapped runs on jax 0.10.2 CPU), then gathered over the rows.
With R = 1 (the default) this is the 1-D data-parallel program, value for value.

Global array layout (S members, R rows, D shards, E envs per member, E/D per shard),
POP = POPULATION_AXIS:
  train_state  `[S, ...]`              spec P(POP), except
    .shard_state `[S, D, ...]`         spec P(POP, DATA_AXIS) (`podrl.core.learner_state`)
    .hyperparams {field: `[S]`}        a population's swept values (else ())
  acting       `[S, E, ...]`           spec P(POP, DATA_AXIS)
  key          `[S, D]` typed keys     spec P(POP, DATA_AXIS), one per shard

Keys follow `podrl.core.keys` (the tree Sebulba uses too): seed `seed + s` gives the
params, env and run keys; shard d's base key is `base_key(run_key, d)` and update
`i` draws from `update_keys(base, i)`, so a run is a pure function of (seed, update index).
Shard d's envs are the member's env columns `d * E/D + [0, E/D)` (`podrl.core.types.EnvColumns`,
what `Agent.init_actor_state` is told), as Sebulba numbers its threads' envs.
"""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from podrl.anakin.config import AnakinConfig
from podrl.anakin.rollout import ActingState, EpisodeTotals, reset_batch, rollout
from podrl.core.finite import InputCounts, add_counts, count_nonfinite
from podrl.core.keys import base_key, env_keys, eval_keys, per_seed_keys, seed_keys, update_keys
from podrl.core.learner_state import broadcast_prefix, shard_global, shard_local, train_state_spec
from podrl.core.mesh import population_mesh
from podrl.core.parallel import (
    DATA_AXIS,
    POPULATION_AXIS,
    learner_metrics,
    mean_across_learners,
    sum_across_learners,
    vary_like,
)
from podrl.core.types import Agent, Array, EnvColumns, Metrics, TrainState, env_columns
from podrl.envs.types import JaxEnv
from podrl.envs.wrappers import wrap_for_training
from podrl.run.evaluation import evaluate_greedy
from podrl.run.watchdog import Begun


class AnakinState(NamedTuple):
    """Everything that changes during training (see module docstring for shapes)."""

    train_state: TrainState
    acting: ActingState
    key: Array


class CallMetrics(NamedTuple):
    """Sums over the updates of one call, identical on every shard, `[S]`-leading."""

    agent: Metrics  # sum of each agent metric over the updates done
    episodes: EpisodeTotals  # over all shards
    updates: Array  # float32, updates done in this call
    inputs: InputCounts  # non-finite rewards/observations of the call's training rollouts (`podrl.core.finite`)
    hyperparams: Any = ()  # a population's swept values {field: [S]} during this call (else ())


STATE_SPECS = AnakinState(train_state=train_state_spec(seed_axis=True), acting=P(POPULATION_AXIS, DATA_AXIS),
                          key=P(POPULATION_AXIS, DATA_AXIS))


def gather_members(tree: Any) -> Any:
    """Inside the shard_map: a row's `[S/R, ...]` leaves -> all members' `[S, ...]`, the same on every
    device (each row writes its block into zeros, a psum over the rows joins them: `all_gather`
    is typed as still varying over the rows). With one row it is the identity."""
    rows = jax.lax.axis_size(POPULATION_AXIS)
    if rows == 1:
        return jax.tree.map(lambda x: jax.lax.psum(x, POPULATION_AXIS) if _varies_over_rows(x) else x, tree)
    start = jax.lax.axis_index(POPULATION_AXIS) * jax.tree.leaves(tree)[0].shape[0]

    def place(x):
        whole = jnp.zeros((x.shape[0] * rows,) + x.shape[1:], x.dtype)
        return jax.lax.psum(jax.lax.dynamic_update_slice_in_dim(whole, x, start, axis=0), POPULATION_AXIS)

    return jax.tree.map(place, tree)


def _varies_over_rows(x: Any) -> bool:
    return POPULATION_AXIS in jax.typeof(x).manual_axis_type.varying


def two_d(mesh: Mesh) -> Mesh:
    """`mesh` as the `(POPULATION_AXIS, DATA_AXIS)` mesh (a 1-D data mesh becomes one row)."""
    if POPULATION_AXIS in mesh.axis_names:
        return mesh
    return population_mesh(list(mesh.devices.flat), 1)


class AnakinCompiled:
    """The compiled pieces of an Anakin run: init, train call, evaluation.

    Args:
      agent: the agent (pure functions).
      env: the JAX env as `podrl.envs.make` returns it (time limit included, no auto-reset).
      config: run config (already validated, `check_layout` passed).
      mesh: the `(POPULATION_AXIS, DATA_AXIS)` mesh (`podrl.core.mesh.population_mesh`); a 1-D
        `DATA_AXIS` mesh is taken as one row.
      hyperparams: a population's swept values, {field: float32 `[S]`} (`podrl.core.population`).
    """

    def __init__(self, agent: Agent, env: JaxEnv, config: AnakinConfig, mesh: Mesh, env_spec,
                 hyperparams: dict[str, np.ndarray] | None = None):
        mesh = two_d(mesh)
        self.agent, self.env, self.config, self.mesh, self.env_spec = agent, env, config, mesh, env_spec
        self.hyperparams = {k: np.asarray(v, np.float32) for k, v in (hyperparams or {}).items()}
        self.training_env = wrap_for_training(env)
        self.num_shards = mesh.shape[DATA_AXIS]  # data-parallel shards of one member
        self.rows = mesh.shape[POPULATION_AXIS]
        self.members_per_row = config.members // self.rows
        self.envs_per_shard = config.num_envs // self.num_shards
        self.eval_per_shard = -(-config.eval_episodes // self.num_shards)
        self.trace_count = 0  # times the train call was traced (1 in a healthy run)
        # An env may opt out of shard_map's varying-value check (podrl.envs.gymnax: suite loops whose
        # carries start from constants); every reduction here is an explicit pmean/psum either way.
        self.check_vma = bool(getattr(env, "shard_map_check_vma", True))
        self._init_mapped = self._shard_jit(self._init_shard, in_specs=(P(), P()), out_specs=STATE_SPECS)
        self._call = self._shard_jit(
            self._call_shard, in_specs=(STATE_SPECS, P(), P()), out_specs=(STATE_SPECS, P()), donate=True
        )
        self._eval = self._shard_jit(self._eval_shard, in_specs=(P(POPULATION_AXIS), P()), out_specs=P())
        self._compiled_call = self._compiled_eval = None
        self._ahead: dict[str, Any] = {}  # what `compile_ahead` began: "state" (its layout), "call", "eval"
        self._exploit = None

    def _shard_jit(self, fn: Callable, in_specs, out_specs, donate: bool = False):
        mapped = jax.shard_map(fn, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=self.check_vma)
        return jax.jit(mapped, donate_argnums=(0,) if donate else ())

    # ---- per-shard programs (inside shard_map; leading axis = seeds) ----

    def _init(self, seeds: np.ndarray) -> AnakinState:
        """The compiled init of the members with PRNG seeds `seeds` `[S]` (and this program's hyperparameters)."""
        return self._init_mapped(seeds, self.hyperparams)

    def _row_slice(self, tree: Any) -> Any:
        """All members' `[S, ...]` leaves -> this row's `[S/R, ...]`."""
        start = jax.lax.axis_index(POPULATION_AXIS) * self.members_per_row
        return jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, start, self.members_per_row), tree)

    def _init_shard(self, seeds: Array, hyperparams: dict[str, Array]) -> AnakinState:
        shard = jax.lax.axis_index(DATA_AXIS)

        def one_seed(args):
            seed, member_hyperparams = args
            keys = seed_keys(seed)
            train_state = shard_global(self.agent.init(keys.params, self.env_spec))
            if member_hyperparams:
                train_state = train_state._replace(hyperparams=member_hyperparams)
            shard_env_keys = jax.lax.dynamic_slice_in_dim(
                env_keys(keys.env, self.config.num_envs), shard * self.envs_per_shard, self.envs_per_shard)
            acting = reset_batch(self.training_env, self.agent, shard_env_keys, self._columns())
            return AnakinState(train_state, acting, base_key(keys.run, shard)[None])

        # Seeds one after another, not vmapped: a vmapped init batches the orthogonal
        # initializer's QR over seeds, and jaxlib 0.10.2's CPU LAPACK kernels split a batch
        # over XLA:CPU's intra-op thread pool and block inside it, so two batched QRs running
        # at once on a 2-thread pool wait for each other for ever (issue 8). Unbatched QRs
        # run inline. Same values either way; init runs once, so the loop costs nothing.
        return jax.lax.map(one_seed, self._row_slice((seeds, hyperparams)))

    def _columns(self) -> EnvColumns:
        """This shard's env columns (inside the shard_map): `shard * E/D + [0, E/D)` of a member's E envs."""
        shard = jax.lax.axis_index(DATA_AXIS)
        return env_columns(shard * self.envs_per_shard, self.envs_per_shard, self.config.num_envs)

    def _update(self, state: AnakinState, index: Array) -> tuple[AnakinState, Metrics, EpisodeTotals, InputCounts]:
        rollout_key, update_key = update_keys(state.key[0], index)
        acting, trajectory, totals = rollout(
            self.agent, self.training_env, state.train_state.params, state.acting, rollout_key,
            self.config.rollout_length, self._columns(),
        )
        train_state, metrics = self.agent.update(state.train_state, trajectory, update_key)
        metrics = learner_metrics(metrics, self.check_vma)  # the layout averages what the agent's shard reports
        counts = count_nonfinite(trajectory.reward, trajectory.observation, index, reduce=sum_across_learners)
        return AnakinState(train_state, acting, state.key), metrics, sum_across_learners(totals), counts

    def _call_shard(self, state: AnakinState, first_update: Array, limit: Array) -> tuple[AnakinState, CallMetrics]:
        self.trace_count += 1

        def one_seed(state):
            state = state._replace(train_state=shard_local(state.train_state))
            metric_shapes = jax.eval_shape(lambda s: self._update(s, first_update)[1], state)
            zeros = vary_like(CallMetrics(  # a member's metrics vary over the rows, not the row's shards
                agent=jax.tree.map(lambda m: jnp.zeros(m.shape, m.dtype), metric_shapes),
                episodes=EpisodeTotals.zeros(),
                updates=jnp.zeros((), jnp.float32),
                inputs=InputCounts.zeros(),
            ), state.train_state.update_step)

            def do_update(carry, index):
                state, acc = carry
                state, metrics, totals, counts = self._update(state, index)
                acc = acc._replace(
                    agent=jax.tree.map(jnp.add, acc.agent, metrics),
                    episodes=acc.episodes + totals,
                    updates=acc.updates + 1.0,
                    inputs=add_counts(acc.inputs, counts),
                )
                return state, acc

            def body(carry, i):
                index = first_update + i
                return jax.lax.cond(index < limit, do_update, lambda c, _: c, carry, index), None

            steps = jnp.arange(self.config.updates_per_call, dtype=jnp.int32)
            (state, acc), _ = jax.lax.scan(body, (state, zeros), steps)
            acc = acc._replace(hyperparams=state.train_state.hyperparams)
            return state._replace(train_state=shard_global(state.train_state)), acc

        # no vmap: the rollout's reset cond stays a cond (`podrl.envs.wrappers.batch_step`)
        if self.members_per_row == 1:
            state, acc = jax.tree.map(lambda x: x[None], one_seed(jax.tree.map(lambda x: x[0], state)))
        else:
            state, acc = jax.vmap(one_seed)(state)
        return state, gather_members(acc)

    def _eval_shard(self, params, seed: Array) -> tuple[Array, Array, Array, Array]:
        shard = jax.lax.axis_index(DATA_AXIS)

        def one_seed(params, seed_key):
            keys = eval_keys(seed_key, shard, self.eval_per_shard)
            result = evaluate_greedy(self.agent, self.env, params, keys, self.config.eval_max_steps)
            bad = sum_across_learners(tuple(jnp.sum(flags, dtype=jnp.float32) for flags in (
                result.bad_reward, result.bad_observation, result.no_legal)))
            return (mean_across_learners(jnp.mean(result.returns)),) + bad

        keys = self._row_slice(per_seed_keys(seed, self.config.members))
        return gather_members(jax.vmap(one_seed)(params, keys))

    # ---- host-side API ----

    def init(self) -> AnakinState:
        """Initial state of every seed: seed i starts from PRNG key `seed + i`."""
        return self._init(self._seeds())

    def _seeds(self) -> np.ndarray:
        """The members' PRNG seeds `seed + i` `[S]`, numpy: every process of a multi-host run passes the same value."""
        return np.arange(self.config.members, dtype=np.uint32) + np.uint32(self.config.seed)

    def exploit(self, state: AnakinState, source: np.ndarray, hyperparams: dict[str, np.ndarray]) -> AnakinState:
        """PBT's exploit/explore applied on device (`podrl.core.population`): member i's train state
        becomes member `source[i]`'s, with `hyperparams` ({field: `[S]`}) as its swept values;
        env states and keys stay each member's own. One small jitted gather, the train call is
        not recompiled (the result keeps the state's shardings)."""
        if self._exploit is None:
            shardings = jax.tree.map(lambda x: x.sharding, state)

            def gather(state, source, hyperparams):
                train_state = jax.tree.map(lambda x: jnp.take(x, source, axis=0),
                                           state.train_state._replace(hyperparams=()))
                return state._replace(train_state=train_state._replace(hyperparams=hyperparams))

            self._exploit = jax.jit(gather, out_shardings=shardings, donate_argnums=(0,))
        hyperparams = {k: np.asarray(v, np.float32) for k, v in hyperparams.items()}
        return self._exploit(state, np.asarray(source, np.int32), hyperparams)

    def abstract_state(self) -> AnakinState:
        """What `init` returns, as `jax.ShapeDtypeStruct`s with its shardings (traced; nothing compiles or runs)."""
        shapes = jax.eval_shape(self._init, self._seeds())
        specs = broadcast_prefix(STATE_SPECS, shapes)
        return jax.tree.map(
            lambda x, spec: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(self.mesh, spec)),
            shapes, specs)

    def compile_ahead(self, timeout_s: float) -> None:
        """Begins compiling the train call and (with `eval_episodes`) the evaluation in background threads, for
        `abstract_state()`, so that they compile while `init` runs (`podrl.run.watchdog.Begun`, each under
        `timeout_s`); `compile` and `evaluate_params` take them for a state laid out the same."""
        state = self.abstract_state()
        self._ahead = {"state": _layout(state), "params": _layout(state.train_state.params),
                       "call": Begun("compile", timeout_s, lambda: _timed_compile(self._call, state, np.int32(0),
                                                                                  np.int32(0)))}
        if self.config.eval_episodes:
            self._ahead["eval"] = Begun("compile the evaluation", timeout_s, lambda: _timed_compile(
                self._eval, state.train_state.params, np.uint32(0)))

    def compile(self, state: AnakinState) -> float:
        """Compiles the train call for `state` ahead of time (or takes the one `compile_ahead` began, and its
        evaluation, when `state` is laid out as it assumed: a resume's restored state may not be); returns
        the seconds the train call's trace, lowering and compile took."""
        ahead, self._ahead = self._ahead, {}
        done = _wait_all({name: ahead[name] for name in ("call", "eval") if name in ahead})
        if "eval" in done:  # (the evaluation, the params' layout it serves)
            self._compiled_eval = (done["eval"][0], ahead["params"])
        if "call" in done and _fits(state, ahead["state"]):
            self._compiled_call, seconds = done["call"]
            return seconds
        self._compiled_call, seconds = _timed_compile(self._call, state, np.int32(0), np.int32(0))
        return seconds

    def program_text(self) -> str:
        """The compiled train call's optimized HLO (after `compile`): its op names are the
        thunk names of a profiler trace (`podrl.run.profiling.loop_labels`)."""
        if self._compiled_call is None:
            raise RuntimeError("compile() first")
        return self._compiled_call.as_text()

    def train_call(self, state: AnakinState, first_update: int,
                   limit: int | None = None) -> tuple[AnakinState, CallMetrics]:
        """Runs updates `first_update .. first_update + updates_per_call`, none at or past
        `limit` (default: the run's total)."""
        call = self._compiled_call or self._call
        limit = self.config.num_updates if limit is None else limit
        return call(state, np.int32(first_update), np.int32(limit))

    def evaluate(self, state: AnakinState, seed: int) -> np.ndarray:
        """Mean greedy return per member `[S]` over `eval_episodes` (rounded up to a multiple of the shards)."""
        return self.evaluate_params(state.train_state.params, seed)[0]

    def evaluate_params(self, params: Any, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Greedy returns `[S]` of `params` (a state's `train_state.params`, or a copy with its sharding),
        and per member how many episodes met a NaN/Inf reward / observation, or an all-False action mask `[S]`.
        The evaluation `compile` took from `compile_ahead` serves params laid out as it was compiled for; other
        params go through jit."""
        evaluate = self._eval
        if self._compiled_eval is not None and _fits(params, self._compiled_eval[1]):
            evaluate = self._compiled_eval[0]
        return tuple(np.asarray(x) for x in evaluate(params, np.uint32(seed)))


def _wait_all(begun: dict[str, Begun]) -> dict[str, Any]:
    """Each `Begun`'s result, by name, once all of them have ended (so none still compiles when this returns);
    the first failure is raised after that, with a note naming the background compile it came from."""
    results, failure = {}, None
    for name, compile_job in begun.items():
        try:
            results[name] = compile_job.result()
        except BaseException as e:  # noqa: BLE001 -- re-raised below, once the others have ended
            e.add_note(f"(raised by {compile_job.stage!r}, begun in a background thread while init ran: "
                       "AnakinCompiled.compile_ahead)")
            failure = failure or e
    if failure is not None:
        raise failure
    return results


def _layout(tree: Any) -> tuple:
    """What a compiled program's inputs must match: `tree`'s structure, and each leaf's shape, dtype and sharding."""
    leaves, structure = jax.tree.flatten(tree)
    return structure, [(x.shape, x.dtype, getattr(x, "sharding", None)) for x in leaves]


def _fits(tree: Any, layout: tuple) -> bool:
    """Whether `tree` has `layout` (`_layout`), shardings compared by the devices' share of each leaf (jit
    writes `P(None, "data")` for the `P("population", "data")` of a size-1 population axis: the same layout)."""
    structure, expected = layout
    leaves, mine = _layout(tree)[1], jax.tree.structure(tree)
    return mine == structure and len(leaves) == len(expected) and all(
        shape == s and dtype == d and sharding is not None and sharding.is_equivalent_to(e, len(shape))
        for (shape, dtype, sharding), (s, d, e) in zip(leaves, expected))


def _timed_compile(jitted: Callable, *args: Any) -> tuple[Any, float]:
    """`(jitted.lower(*args).compile(), the seconds it took)`."""
    start = time.perf_counter()
    return jitted.lower(*args).compile(), time.perf_counter() - start


def summarize_call(metrics: CallMetrics) -> dict[str, Any]:
    """Host-side per-seed means (`[S]` arrays) of one call's metrics."""
    metrics = jax.device_get(metrics)
    updates = np.maximum(np.asarray(metrics.updates), 1.0)
    out: dict[str, Any] = {f"train/{k}": np.asarray(v) / updates for k, v in metrics.agent.items()}
    count = np.asarray(metrics.episodes.count)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["episode_return"] = np.where(count > 0, metrics.episodes.return_sum / count, np.nan)
        out["episode_length"] = np.where(count > 0, metrics.episodes.length_sum / count, np.nan)
    out["episodes"] = count
    for name, value in (metrics.hyperparams or {}).items():
        out[f"hp/{name}"] = np.asarray(value)
    return out
