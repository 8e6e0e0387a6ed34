"""The Sebulba run: build envs and compile in the main thread, start actors, learn.

The main thread is the learner. Update `i` takes rollout `i` from every actor
queue in thread order (deterministic batches), runs the learner step, checks the
metrics are finite, blocks until the new params are ready and publishes them as
version `i + 1`. Env steps are counted here, where rollouts are consumed. On any
error (in any thread) or at the end, the stop signal is set, every thread is
joined and every env closed; a worker's exception is re-raised here.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import jax
import numpy as np

from podrl.distributed import host_sum, is_main_process
from podrl.errors import NonFiniteError, check_finite
from podrl.profiling import CallProfiler
from podrl.sebulba.actor import Rollout
from podrl.sebulba.config import SebulbaConfig
from podrl.sebulba.learner import make_learner_step
from podrl.sebulba.setup import ActorSetup, build_actors
from podrl.sebulba.stats import WindowStats
from podrl.run import RunContext
from podrl.sebulba.transport import bytes_per_step, place_on_learners
from podrl.types import AgentConfig, TrainState


class SebulbaResult(NamedTuple):
    train_state: TrainState  # on the learner devices (`podrl.learner_state`)
    history: list[dict[str, Any]]  # one record per log window
    policy_lags: np.ndarray  # int [num_updates, num_threads]: learner version - actor version
    final_eval_return: float | None
    steps_per_second: float  # env steps consumed per second, after compilation
    compile_seconds: float
    env_steps: int  # env steps of this process's actors consumed by the learner
    global_env_steps: int  # the same over all processes
    run_dir: str | None
    checkpoint_dir: str | None = None
    stopped_by: str | None = None  # "SIGTERM", "SIGINT", "stop_after_updates", or None


def train_sebulba(config: SebulbaConfig, agent_config: AgentConfig, env_factory=None,
                  full_config: Any = None) -> SebulbaResult:
    """Trains `agent_config`'s agent with the Sebulba layout on `config.env`.

    Args:
      env_factory: optional `(thread_index, num_envs) -> HostVectorEnv` replacing
        `config.env` (tests and users with unusual envs).
    """
    local = jax.local_devices()
    learner_ids = config.check_layout(len(local), agent_config)
    with RunContext(config, agent_config, full_config) as run:
        setup = None
        try:
            setup = build_actors(config, agent_config, env_factory, local, learner_ids, run)
            return _run(config, setup, run)
        finally:
            if setup is not None:
                _shut_down(setup, config.timeout_s)


JOIN_GRACE_S = 1.0
"""How long the learner waits, in all, for stopped actor threads to finish (they wake within a 0.05 s poll slice)."""


def _shut_down(setup: ActorSetup, timeout: float) -> None:
    """Stops and joins every actor thread, closes every env.

    Healthy threads see the stop signal within a poll slice; a thread stuck in its
    env (the usual reason a run stops on a timeout) never will, so the joins share
    one short deadline instead of waiting `timeout` for it: the error reaches the
    user at once and the stuck daemon thread dies with the process.
    """
    setup.stop.stop()
    deadline = time.monotonic() + min(timeout, JOIN_GRACE_S)
    for thread in setup.threads:
        if thread.is_alive():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
    for env in setup.envs:
        env.close()


def _compile(setup: ActorSetup):
    step = make_learner_step(setup.agent, setup.learner_mesh, len(setup.threads))
    example = [place_on_learners(setup.example_trajectory, setup.shardings)] * len(setup.threads)
    return step.compile(setup.train_state, setup.learner_keys, np.int32(0), *example)


def _run(config: SebulbaConfig, setup: ActorSetup, run: RunContext) -> SebulbaResult:
    start = time.perf_counter()
    compiled = _compile(setup)
    compile_seconds = setup.act_compile_seconds + time.perf_counter() - start
    run.logger.info(f"{config.env}: {len(setup.threads)} actor thread(s) x {config.envs_per_thread} envs on "
                    f"{len(setup.source.actor_devices)} actor device(s), {setup.learner_mesh.devices.size} learner "
                    f"device(s), lag={config.lag}, updates {run.start}..{run.limit} of {config.num_updates}; "
                    f"compiled in {compile_seconds:.1f}s; trajectory "
                    f"{bytes_per_step(setup.example_trajectory)['total']:,.0f} bytes per env step")
    protocol = getattr(setup.envs[0], "protocol", None)  # Atari envs say which protocol they follow
    if protocol is not None:
        run.logger.info(protocol.describe())
    setup.source.publish(setup.train_state.params, run.start)
    for thread in setup.threads:
        thread.start()
    loop = _LearnerLoop(config, setup, run, compiled)
    profiler = CallProfiler(config.logging.profile, run.limit - run.start, count=3)
    try:
        for i in range(run.start, run.limit):
            profiler.before(i - run.start)
            loop.update(i)
            profiler.after(i - run.start)
            if run.after_update(i + 1, loop.train_state, loop.train_state.params):
                break
    except NonFiniteError as e:
        run.note_failure(e)
        raise
    except BaseException:  # an actor, env or timeout failure: keep the learner's work
        run.checkpoints.save(loop.done, loop.train_state, loop.train_state.params)
        raise
    finally:
        profiler.stop()
    sps = loop.global_steps / loop.training_seconds()
    final_eval = loop.history[-1].get("eval_return") if loop.history else None
    stopped_by = run.finish(loop.done, loop.train_state, loop.train_state.params, sps, final_eval)
    return SebulbaResult(loop.train_state, loop.history, loop.lags, final_eval, sps,
                         compile_seconds, loop.env_steps, loop.global_steps, run.logger.run_dir,
                         run.checkpoints.directory, stopped_by)


class _LearnerLoop:
    """The learner's per-update work and bookkeeping (main thread).

    `env_steps` / `global_steps` count what this run consumed (this process / all
    processes); logged steps add the checkpoint's count when resuming.
    """

    def __init__(self, config: SebulbaConfig, setup: ActorSetup, run: RunContext, compiled):
        self.config, self.setup, self.run, self.compiled = config, setup, run, compiled
        self.train_state, self.done = setup.train_state, run.start
        self.stats = WindowStats(setup.threads)
        self.history: list[dict[str, Any]] = []
        self.lags = np.zeros((config.num_updates, len(setup.threads)), np.int64)
        self.env_steps = self.global_steps = 0
        self.train_start = time.perf_counter()
        self.eval_seconds = 0.0  # kept out of SPS

    def update(self, i: int) -> None:
        setup, config = self.setup, self.config
        t0 = time.perf_counter()
        rollouts = [_take(setup, j, i, config.timeout_s) for j in range(len(setup.threads))]
        t1 = time.perf_counter()
        train_state, metrics = self.compiled(self.train_state, setup.learner_keys, np.int32(i),
                                             *(r.trajectory for r in rollouts))
        metrics = jax.device_get(metrics)
        check_finite({f"train/{k}": v for k, v in metrics.items()}, i, i + 1)
        self.train_state, self.done = train_state, i + 1
        setup.source.publish(train_state.params, i + 1)
        t2 = time.perf_counter()
        self.lags[i] = [i - r.version for r in rollouts]
        self.env_steps += len(rollouts) * config.rollout_length * config.envs_per_thread  # this host's
        self.stats.add(rollouts, metrics, self.lags[i], queue_wait=t1 - t0, learner=t2 - t1)
        if (i + 1) % config.log_every == 0 or i + 1 == self.run.limit:
            self._log(i + 1)

    def training_seconds(self) -> float:
        """Wall time since training started, evaluation excluded."""
        return time.perf_counter() - self.train_start - self.eval_seconds

    def _log(self, updates: int) -> None:
        config, run = self.config, self.run
        self.global_steps = int(host_sum(np.array([self.env_steps]))[0])
        record = self.stats.flush(self.global_steps, self.training_seconds())
        due = (config.eval_every and updates % config.eval_every == 0) or updates == run.limit
        if due and config.eval_episodes and is_main_process():
            start = time.perf_counter()
            record["eval_return"] = self.setup.evaluate(self.train_state.params, run.eval_seed(updates))
            self.eval_seconds += time.perf_counter() - start
        step = run.logged_steps(run.start) + self.global_steps
        run.logger.log(step, record)
        self.history.append({"step": step, "updates": updates, **record})
        run.logger.progress(step, run.logged_steps(config.num_updates), record["sps"], {
            "return": record.get("episode_return"), "eval": record.get("eval_return"),
            "lag": record["policy_lag_mean"]})


def _take(setup: ActorSetup, thread: int, update: int, timeout: float) -> Rollout:
    actor = setup.threads[thread]
    rollout = setup.stop.get(setup.queues[thread], timeout, f"rollout {update} from actor thread {thread}",
                             on_timeout=actor.describe)
    assert rollout.index == update, f"actor thread {thread} sent rollout {rollout.index}, expected {update}"
    return rollout
