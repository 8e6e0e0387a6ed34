"""The Sebulba run: build envs and compile in the main thread, start actors, learn.

The main thread is the learner. Update `i` takes rollout `i` from every actor
queue in thread order (deterministic batches), runs the learner step, checks the
metrics are finite, blocks until the new params are ready and publishes them as
version `i + 1`. Env steps are counted here, where rollouts are consumed. On any
error (in any thread) or at the end, the stop signal is set, every thread is
joined and every env closed; a worker's exception is re-raised here.
"""

from __future__ import annotations

import queue
import time
from typing import Any, NamedTuple

import jax
import numpy as np

from podrl.distributed import host_sum, is_main_process
from podrl.errors import NonFiniteError, check_finite  # noqa: F401  (re-exported)
from podrl.sebulba.actor import Rollout, place_on_learners
from podrl.sebulba.config import SebulbaConfig
from podrl.sebulba.learner import make_learner_step
from podrl.sebulba.setup import ActorSetup, build_actors
from podrl.sebulba.stats import WindowStats
from podrl.types import TrainState


class SebulbaResult(NamedTuple):
    train_state: TrainState  # replicated on the learner devices
    history: list[dict[str, Any]]  # one record per log window
    policy_lags: np.ndarray  # int [num_updates, num_threads]: learner version - actor version
    final_eval_return: float | None
    steps_per_second: float  # env steps consumed per second, after compilation
    compile_seconds: float
    env_steps: int  # env steps of this process's actors consumed by the learner
    global_env_steps: int  # the same over all processes
    run_dir: str | None


def train_sebulba(config: SebulbaConfig, agent_config, env_factory=None, full_config: Any = None) -> SebulbaResult:
    """Trains `agent_config`'s agent with the Sebulba layout on `config.env`.

    Args:
      env_factory: optional `(thread_index, num_envs) -> HostVectorEnv` replacing
        `config.env` (tests and users with unusual envs).
    """
    from podrl.logging import RunLogger

    local = jax.local_devices()
    learner_ids = config.check_layout(len(local), agent_config)
    setup = build_actors(config, agent_config, env_factory, local, learner_ids)
    logger = RunLogger(config.logging, default_name=f"{config.env.replace(':', '.')}__sebulba__seed{config.seed}",
                       config=full_config if full_config is not None else {"run": config, "agent": agent_config},
                       tag="sebulba")
    try:
        return _run(config, setup, logger)
    finally:
        setup.stop.stop()
        for thread in setup.threads:
            if thread.is_alive():
                thread.join(timeout=config.timeout_s)
        for env in setup.envs:
            env.close()
        logger.close()


def _run(config: SebulbaConfig, setup: ActorSetup, logger) -> SebulbaResult:
    learner_mesh = setup.learner_mesh
    step = make_learner_step(setup.agent, learner_mesh, len(setup.threads))
    train_state = setup.train_state
    start = time.perf_counter()
    example = [place_on_learners(setup.example_trajectory, setup.shardings)] * len(setup.threads)
    compiled = step.lower(train_state, setup.learner_keys, np.int32(0), *example).compile()
    compile_seconds = setup.act_compile_seconds + time.perf_counter() - start
    logger.info(f"{config.env}: {len(setup.threads)} actor thread(s) x {config.envs_per_thread} envs on "
                f"{len(setup.source.actor_devices)} actor device(s), {learner_mesh.devices.size} learner "
                f"device(s), lag={config.lag}, {config.num_updates} updates; compiled in {compile_seconds:.1f}s")
    setup.source.publish(train_state.params, 0)
    for thread in setup.threads:
        thread.start()
    stats = WindowStats(setup.threads)
    history, lags = [], np.zeros((config.num_updates, len(setup.threads)), np.int64)
    train_start, env_steps = time.perf_counter(), 0
    for i in range(config.num_updates):
        t0 = time.perf_counter()
        rollouts = [_take(setup, j, i, config.timeout_s) for j in range(len(setup.threads))]
        t1 = time.perf_counter()
        train_state, metrics = compiled(train_state, setup.learner_keys, np.int32(i), *(r.trajectory for r in rollouts))
        metrics = jax.device_get(metrics)
        check_finite({f"train/{k}": v for k, v in metrics.items()}, i, i + 1)
        setup.source.publish(train_state.params, i + 1)
        t2 = time.perf_counter()
        lags[i] = [i - r.version for r in rollouts]
        env_steps += len(rollouts) * config.rollout_length * config.envs_per_thread  # this host's
        stats.add(rollouts, metrics, lags[i], queue_wait=t1 - t0, learner=t2 - t1)
        if (i + 1) % config.log_every == 0 or i + 1 == config.num_updates:
            global_steps = int(host_sum(np.array([env_steps]))[0])
            record = stats.flush(global_steps, time.perf_counter() - train_start)
            due = (config.eval_every and (i + 1) % config.eval_every == 0) or i + 1 == config.num_updates
            if due and config.eval_episodes and is_main_process():
                record["eval_return"] = setup.evaluate(train_state.params)
            logger.log(global_steps, record)
            history.append({"step": global_steps, "updates": i + 1, **record})
            total = config.num_updates * config.steps_per_update * jax.process_count()
            logger.progress(global_steps, total, record["sps"],
                            {"return": record.get("episode_return"), "eval": record.get("eval_return"),
                             "lag": record["policy_lag_mean"]})
    seconds = time.perf_counter() - train_start
    final_eval = history[-1].get("eval_return") if history else None
    return SebulbaResult(train_state, history, lags, final_eval, global_steps / seconds, compile_seconds,
                         env_steps, global_steps, logger.run_dir)


def _take(setup: ActorSetup, thread: int, update: int, timeout: float) -> Rollout:
    actor = setup.threads[thread]
    rollout = setup.stop.get(setup.queues[thread], timeout, f"rollout {update} from actor thread {thread}",
                             on_timeout=actor.describe)
    assert rollout.index == update, f"actor thread {thread} sent rollout {rollout.index}, expected {update}"
    return rollout
