"""Anakin: the JAX env and the agent in one jitted program per device.

One compiled call runs `updates_per_call` updates. On every device (a shard of
the `DATA_AXIS` mesh) and for every seed (vmap), an update is: a `lax.scan`
rollout over the shard's envs, then `Agent.update`, whose gradients are averaged
over all shards. Params are replicated; env states and PRNG keys are split over
devices. Metrics are reduced on device inside the scan carry, so nothing of
shape `[updates, ...]` is stacked (that froze vmapped runs on jax 0.10.2 CPU).

Global array layout (S seeds, D shards, E envs per seed, E/D per shard):
  train_state  `[S, ...]`              replicated, spec P(), except
    .shard_state `[S, D, ...]`         spec P(None, DATA_AXIS) (`podrl.learner_state`)
  acting       `[S, E, ...]`           spec P(None, DATA_AXIS)
  key          `[S, D]` typed keys     spec P(None, DATA_AXIS), one per shard

Keys follow `podrl.keys` (the tree Sebulba uses too): seed `seed + s` gives the
params, env and run keys; shard d's base key is `base_key(run_key, d)` and update
`i` draws from `update_keys(base, i)`, so a run is a pure function of (seed, update index).
"""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from envs.types import JaxEnv
from envs.wrappers import wrap_for_training
from podrl.config import AnakinConfig
from podrl.evaluation import evaluate_greedy
from podrl.learner_state import shard_global, shard_local, train_state_spec
from podrl.parallel import DATA_AXIS, mean_across_learners, sum_across_learners
from podrl.keys import base_key, env_keys, eval_keys, per_seed_keys, seed_keys, update_keys
from podrl.rollout import ActingState, EpisodeTotals, reset_batch, rollout
from podrl.types import Agent, Array, Metrics, TrainState


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


STATE_SPECS = AnakinState(train_state=train_state_spec(seed_axis=True), acting=P(None, DATA_AXIS), key=P(None, DATA_AXIS))


class AnakinProgram:
    """The compiled pieces of an Anakin run: init, train call, evaluation.

    Args:
      agent: the agent (pure functions).
      env: the JAX env as `envs.make` returns it (time limit included, no auto-reset).
      config: run config (already validated, `check_layout` passed).
      mesh: a 1-D mesh over `DATA_AXIS`.
    """

    def __init__(self, agent: Agent, env: JaxEnv, config: AnakinConfig, mesh: Mesh, env_spec):
        self.agent, self.env, self.config, self.mesh, self.env_spec = agent, env, config, mesh, env_spec
        self.training_env = wrap_for_training(env)
        self.num_shards = mesh.devices.size
        self.envs_per_shard = config.num_envs // self.num_shards
        self.eval_per_shard = -(-config.eval_episodes // self.num_shards)
        self.trace_count = 0  # times the train call was traced (1 in a healthy run)
        self._init = self._shard_jit(self._init_shard, in_specs=P(), out_specs=STATE_SPECS)
        self._call = self._shard_jit(
            self._call_shard, in_specs=(STATE_SPECS, P(), P()), out_specs=(STATE_SPECS, P()), donate=True
        )
        self._eval = self._shard_jit(self._eval_shard, in_specs=(P(), P()), out_specs=P())
        self._compiled_call = None

    def _shard_jit(self, fn: Callable, in_specs, out_specs, donate: bool = False):
        # An env may opt out of shard_map's varying-value check (envs.gymnax: suite loops whose
        # carries start from constants); every reduction here is an explicit pmean/psum either way.
        check_vma = bool(getattr(self.env, "shard_map_check_vma", True))
        mapped = jax.shard_map(fn, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_vma)
        return jax.jit(mapped, donate_argnums=(0,) if donate else ())

    # ---- per-shard programs (inside shard_map; leading axis = seeds) ----

    def _init_shard(self, seeds: Array) -> AnakinState:
        shard = jax.lax.axis_index(DATA_AXIS)

        def one_seed(seed):
            keys = seed_keys(seed)
            train_state = shard_global(self.agent.init(keys.params, self.env_spec))
            shard_env_keys = jax.lax.dynamic_slice_in_dim(
                env_keys(keys.env, self.config.num_envs), shard * self.envs_per_shard, self.envs_per_shard)
            acting = reset_batch(self.training_env, self.agent, shard_env_keys)
            return AnakinState(train_state, acting, base_key(keys.run, shard)[None])

        # Seeds one after another, not vmapped: a vmapped init batches the orthogonal
        # initializer's QR over seeds, and jaxlib 0.10.2's CPU LAPACK kernels split a batch
        # over XLA:CPU's intra-op thread pool and block inside it, so two batched QRs running
        # at once on a 2-thread pool wait for each other for ever (issue 8). Unbatched QRs
        # run inline. Same values either way; init runs once, so the loop costs nothing.
        return jax.lax.map(one_seed, seeds)

    def _update(self, state: AnakinState, index: Array) -> tuple[AnakinState, Metrics, EpisodeTotals]:
        rollout_key, update_key = update_keys(state.key[0], index)
        acting, trajectory, totals = rollout(
            self.agent, self.training_env, state.train_state.params, state.acting, rollout_key,
            self.config.rollout_length,
        )
        train_state, metrics = self.agent.update(state.train_state, trajectory, update_key)
        return AnakinState(train_state, acting, state.key), metrics, sum_across_learners(totals)

    def _call_shard(self, state: AnakinState, first_update: Array, limit: Array) -> tuple[AnakinState, CallMetrics]:
        self.trace_count += 1

        def one_seed(state):
            state = state._replace(train_state=shard_local(state.train_state))
            metric_shapes = jax.eval_shape(lambda s: self._update(s, first_update)[1], state)
            zeros = CallMetrics(
                agent=jax.tree.map(lambda m: jnp.zeros(m.shape, m.dtype), metric_shapes),
                episodes=EpisodeTotals.zeros(),
                updates=jnp.zeros((), jnp.float32),
            )

            def do_update(carry, index):
                state, acc = carry
                state, metrics, totals = self._update(state, index)
                acc = CallMetrics(
                    agent=jax.tree.map(jnp.add, acc.agent, metrics),
                    episodes=acc.episodes + totals,
                    updates=acc.updates + 1.0,
                )
                return state, acc

            def body(carry, i):
                index = first_update + i
                return jax.lax.cond(index < limit, do_update, lambda c, _: c, carry, index), None

            steps = jnp.arange(self.config.updates_per_call, dtype=jnp.int32)
            (state, acc), _ = jax.lax.scan(body, (state, zeros), steps)
            return state._replace(train_state=shard_global(state.train_state)), acc

        return jax.vmap(one_seed)(state)

    def _eval_shard(self, params, seed: Array) -> Array:
        shard = jax.lax.axis_index(DATA_AXIS)

        def one_seed(params, seed_key):
            keys = eval_keys(seed_key, shard, self.eval_per_shard)
            result = evaluate_greedy(self.agent, self.env, params, keys, self.config.eval_max_steps)
            return mean_across_learners(jnp.mean(result.returns))

        return jax.vmap(one_seed)(params, per_seed_keys(seed, self.config.num_seeds))

    # ---- host-side API ----

    def init(self) -> AnakinState:
        """Initial state of every seed: seed i starts from PRNG key `seed + i`."""
        # numpy in, so every process of a multi-host run passes the same replicated value
        seeds = np.arange(self.config.num_seeds, dtype=np.uint32) + np.uint32(self.config.seed)
        return self._init(seeds)

    def compile(self, state: AnakinState) -> float:
        """Compiles the train call ahead of time; returns the seconds it took."""
        start = time.perf_counter()
        self._compiled_call = self._call.lower(state, np.int32(0), np.int32(0)).compile()
        return time.perf_counter() - start

    def train_call(self, state: AnakinState, first_update: int, limit: int | None = None) -> tuple[AnakinState, CallMetrics]:
        """Runs updates `first_update .. first_update + updates_per_call`, none at or past
        `limit` (default: the run's total)."""
        call = self._compiled_call or self._call
        limit = self.config.num_updates if limit is None else limit
        return call(state, np.int32(first_update), np.int32(limit))

    def evaluate(self, state: AnakinState, seed: int) -> np.ndarray:
        """Mean greedy return per seed `[S]` over `eval_episodes` (rounded up to a multiple of the shards)."""
        return np.asarray(self._eval(state.train_state.params, np.uint32(seed)))


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
    return out
