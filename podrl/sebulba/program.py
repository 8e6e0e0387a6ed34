"""The Sebulba host program: actor threads on host envs feed the learner step in the main thread.

It has Anakin's host interface (`podrl.run.driver.Program`), so `podrl.run.driver.drive` runs it.
It runs what `podrl.sebulba.setup.build` built before the run (the envs, checked against their
specs, the agent, the learner mesh): `init` is the fresh train state on the learner mesh;
`compile` resets the envs and compiles inference on every actor device and the learner step;
`start` publishes the params and starts the actors (`ActorPool`); one training call is one
update; `close` stops and joins every thread and closes every env.

Keys and host env seeds come from `podrl.core.keys` (the tree Anakin uses): the params from
`seed_keys(seed).params`; actor thread j (global index) acts with base key `base_key(run_key, j)`,
learner shard d updates with `base_key(run_key, d)`; JAX host envs reset thread j's envs with
slice j of `env_keys(env_key, total_envs)` (`podrl.sebulba.rollout.reset_env`), and its envs are the
env columns `j * envs_per_thread + [0, envs_per_thread)` its actor state is made for
(`podrl.core.types.EnvColumns`). With one thread and one learner device this is exactly Anakin's
single-device schedule.

Update `i` takes rollout `i` from every actor queue in thread order (deterministic batches),
runs the learner step, checks the rollouts' rewards/observations and the metrics are finite,
blocks until the new params are ready and publishes them as version `i + 1` (`ParamsSource`).
Env steps are counted here, where rollouts are consumed. A record is flushed every `log_every`
updates and after the last. A worker's exception stops every thread and is re-raised here.
"""

from __future__ import annotations

import queue
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from podrl.core.distributed import host_sum, is_main_process
from podrl.core.finite import InputCounts, check_evaluation, check_training, rows_with_nonfinite
from podrl.core.keys import base_key, seed_keys
from podrl.core.learner_state import (
    Placement,
    host_key_data,
    init_on_mesh,
    reshard_train_state,
    train_state_shard_axes,
    train_state_spec,
)
from podrl.core.mesh import local_replica
from podrl.core.parallel import DATA_AXIS
from podrl.core.types import TrainState, env_columns
from podrl.run.evaluation import evaluate_host_greedy
from podrl.sebulba.config import SebulbaConfig
from podrl.sebulba.learner import LearnerStep, make_learner_step
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.rollout import ActorLink, ActorPolicy, ActorPool, ActorThread, make_act_step, reset_env, warm_up
from podrl.sebulba.setup import SebulbaSetup, make_env
from podrl.sebulba.stats import WindowStats
from podrl.sebulba.stopping import StopSignal
from podrl.sebulba.transport import bytes_per_step, learner_shardings, place_on_learners


class SebulbaProgram:
    """One Sebulba run on this process (see the module docstring).

    Args:
      config: the run config.
      built: what `podrl.sebulba.setup.build` built for it (the envs are the program's to close).

    After a run: `lags` (int `[num_updates, threads]`, learner version - actor version),
    `env_steps` (this process's consumed env steps), `global_steps` (over all processes).
    """

    save_on_failure = True  # the learner's train state survives an actor's failure
    profile_calls = 3

    def __init__(self, config: SebulbaConfig, built: SebulbaSetup):
        self.config, self.env_factory = config, built.env_factory
        self.agent, self.spec, self.mesh, self.actor_devices = built.agent, built.spec, built.mesh, built.actor_devices
        self.keys = seed_keys(config.seed)
        self.stop = StopSignal()
        self.pool = ActorPool([], list(built.envs), self.stop, config.timeout_s)
        self.lags = np.zeros((config.num_updates, config.num_threads), np.int64)
        self.env_steps = self.global_steps = 0
        self._eval_env = None
        self.limit = config.num_updates
        # a learner step's result `train` has not returned
        self._stepped: tuple[int, TrainState, Any, Any] | None = None

    # ---- building (main thread) ----

    def init(self) -> TrainState:
        """The fresh train state on the learner mesh."""
        return init_on_mesh(self.agent, self.keys.params, self.spec, self.mesh)

    def placement(self) -> Placement:
        """The train state on the learner mesh (`podrl.core.learner_state`): `shard_state` `[D, ...]` is per
        learner shard and moves by the agent's rule onto another shard count (the host envs, never saved,
        start fresh episodes on every resume)."""
        return Placement(self.mesh, train_state_spec(), train_state_shard_axes(),
                         lambda fresh, restored, _: reshard_train_state(self.agent.reshard_state, restored, fresh, 0))

    def compile(self, state: TrainState) -> float:
        """Resets the envs, compiles inference on every actor device and the learner step."""
        config, start = self.config, time.perf_counter()
        threads, total = config.num_threads, jax.process_count() * config.num_threads * config.envs_per_thread
        groups, size = config.env_groups, config.envs_per_group
        self.firsts = [reset_env(env, self.keys.env, jax.process_index() * threads + k // groups, total, config.seed,
                                 offset=(k % groups) * size, thread_envs=config.envs_per_thread)
                       for k, env in enumerate(self.pool.envs)]
        self.act_step, local_params = make_act_step(self.agent), local_replica(state.params)
        for device in self.actor_devices:  # compile inference for every actor device, in this thread
            self.example = warm_up(self.agent, self.act_step, local_params, self.firsts[0], device,
                                   config.rollout_length, groups)
        self.shardings = learner_shardings(self.mesh, self.example)
        shards = self.mesh.devices.size
        run_key, as_key = host_key_data(self.keys.run)  # an argument, not a constant: one program for every seed
        self.learner_keys = jax.jit(lambda data: jax.vmap(lambda d: base_key(as_key(data), d))(jnp.arange(shards)),
                                    out_shardings=NamedSharding(self.mesh, P(DATA_AXIS)))(run_key)
        pieces = [place_on_learners(self.example, self.shardings)] * threads
        step = make_learner_step(self.agent, self.mesh, threads)
        self.step: LearnerStep = step.compile(state, self.learner_keys, np.int32(0), *pieces)
        return time.perf_counter() - start

    def start(self, state: TrainState, start: int, limit: int, compile_seconds: float) -> list[str]:
        """Publishes `state`'s params as version `start` and starts the actors on rollouts `start..limit-1`."""
        config = self.config
        self.limit = limit
        self.source = ParamsSource(self.actor_devices, config.fixed_lag, self.stop, config.timeout_s,
                                   first_version=start)
        first_thread = jax.process_index() * config.num_threads  # global index of this process's thread 0
        n, total = config.envs_per_thread, jax.process_count() * config.num_threads * config.envs_per_thread
        groups = config.env_groups
        for j in range(config.num_threads):
            slot = j // config.threads_per_actor_device
            policy = ActorPolicy(self.agent, self.act_step, self.actor_devices[slot], slot, config.rollout_length,
                                 self.shardings, self.example)
            link = ActorLink(self.source, queue.Queue(maxsize=config.queue_size), self.stop, config.timeout_s)
            mine = slice(j * groups, (j + 1) * groups)
            cpu = config.actor_cpus[j % len(config.actor_cpus)] if config.actor_cpus else None
            self.pool.threads.append(ActorThread(j, self.pool.envs[mine], self.firsts[mine], policy, link,
                                                 base_key(self.keys.run, first_thread + j), range(start, limit), cpu,
                                                 env_columns((first_thread + j) * n, n, total)))
        self.stats = WindowStats(self.pool.threads)
        self.source.publish(state.params, start)
        self.pool.start()
        self.train_start, self.eval_seconds = time.perf_counter(), 0.0
        split = f" ({groups} groups of {config.envs_per_group})" if groups > 1 else ""
        lines = [f"{config.env}: {config.num_threads} actor thread(s) x {config.envs_per_thread} envs{split} on "
                 f"{len(self.actor_devices)} actor device(s), {self.mesh.devices.size} learner device(s), "
                 f"lag={config.lag}, updates {start}..{limit} of {config.num_updates}; compiled in "
                 f"{compile_seconds:.1f}s; trajectory {bytes_per_step(self.example)['total']:,.0f} bytes per env step"]
        protocol = getattr(self.pool.envs[0], "protocol", None)  # Atari envs say which protocol they follow
        return lines + ([protocol.describe()] if protocol is not None else [])

    # ---- training (driver) ----

    def call_end(self, first: int, limit: int) -> int:
        return first + 1

    def train(self, state: TrainState, first: int, last: int) -> tuple[TrainState, dict[str, Any] | None]:
        """Update `first` (one call is one update); a record every `log_every` updates and after the last."""
        i, config = first, self.config
        t0 = time.perf_counter()
        rollouts = self.pool.take(i)
        t1 = time.perf_counter()
        state, metrics, inputs = self.step.checked(state, self.learner_keys, np.int32(i),
                                                   *(r.trajectory for r in rollouts))
        self._stepped = (i + 1, state, metrics, inputs)  # the driver's state lost its donated replay
        metrics, inputs = _checked(metrics, inputs, i, self.config.env)
        self.source.publish(state.params, i + 1)  # blocks until the update has finished on every learner device
        self.pool.recycle(rollouts)  # ... so their buffers may be written again
        t2 = time.perf_counter()
        self.lags[i] = [i - r.version for r in rollouts]
        self.env_steps += len(rollouts) * config.rollout_length * config.envs_per_thread  # this host's
        self.stats.add(rollouts, metrics, self.lags[i], queue_wait=t1 - t0, learner=t2 - t1)
        record = None
        if (i + 1) % config.log_every == 0 or i + 1 == self.limit:
            self.global_steps = int(host_sum(np.array([self.env_steps]))[0])
            record = self.stats.flush(self.global_steps, time.perf_counter() - self.train_start - self.eval_seconds)
        self._stepped = None  # the driver holds the step's result from here on
        return state, record

    def failure_state(self, done: int, state: TrainState) -> tuple[int, TrainState]:
        """After a failed call: `(updates, state)` to checkpoint. The learner step takes (donates) the
        replay of the state it is given, so after a failure between update `i`'s step and the end of
        `train` (an interrupt while the main thread waits for the step or publishes its params) `state`
        has none: then it is the step's own result, update `i + 1`, once that passes the finite check."""
        if self._stepped is None:
            return done, state
        (update, stepped, metrics, inputs), self._stepped = self._stepped, None
        _checked(metrics, inputs, update - 1, self.config.env)
        return update, stepped

    def evaluate(self, params: Any, seed: int, update: int) -> float | None:
        """Mean greedy return on its own env batch (built on first use), on process 0 only (no collective).
        With `eval_async` it runs beside training, so its time is not taken out of the records' SPS."""
        if not (self.config.eval_episodes and is_main_process()):
            return None
        start = time.perf_counter()
        if self._eval_env is None:
            self._eval_env = make_env(self.config, self.env_factory, -1, self.config.eval_episodes)
            self.pool.envs.append(self._eval_env)  # closed with the others
        params = jax.device_put(local_replica(params), self.actor_devices[0])
        result = evaluate_host_greedy(self.agent, params, self._eval_env, seed=seed,
                                      max_steps=self.config.eval_max_steps)
        if not self.config.eval_async:
            self.eval_seconds += time.perf_counter() - start
        check_evaluation(np.sum(result.bad_reward), np.sum(result.bad_observation), result.returns.size, update,
                         np.sum(result.no_legal), self.config.env)
        return float(np.mean(result.returns))

    def after_record(self, state: TrainState, record: dict[str, Any], update: int) -> TrainState:
        return state

    def progress(self, record: dict[str, Any]) -> dict[str, float | None]:
        return {"return": record.get("episode_return"), "eval": record.get("eval_return"),
                "lag": record["policy_lag_mean"]}

    def params(self, state: TrainState) -> Any:
        return state.params

    def env_steps_of(self, updates: int) -> int:
        return updates * self.config.steps_per_update * jax.process_count()

    def close(self) -> None:
        """Stops and joins the actors, closes every env."""
        self.pool.close()


def _checked(metrics: Any, inputs: InputCounts, update: int, env: str) -> tuple[Any, InputCounts]:
    """Update `update`'s metrics and input counts on the host, after the finite check (NonFiniteError)."""
    metrics, inputs = jax.device_get((metrics, inputs))
    check_training({f"train/{k}": v for k, v in metrics.items()}, inputs, update, update + 1, _threads(inputs),
                   env=env)
    return metrics, inputs


def _threads(inputs: InputCounts) -> str:
    """Which actor threads' rollouts held a non-finite input, e.g. " (actor thread 0)"."""
    bad = rows_with_nonfinite(inputs)
    return f" (actor thread {', '.join(map(str, bad))})" if bad else ""
