"""Sebulba actor threads: step host envs, infer on an actor device, ship rollouts.

An actor thread owns one `HostVectorEnv` (built before the run, `podrl.sebulba.setup`, and
reset here, `reset_env`, with its inference compiled in the main thread, `warm_up`), one
bounded queue and one PRNG key. For rollout `i` it takes params from the
`ParamsSource` (the staleness protocol lives there), acts `rollout_length` steps,
places the `[T, B]` Trajectory on the learner devices split along the batch axis
(`podrl.sebulba.transport`),
and puts it on its queue. Any exception stops the whole run (`StopSignal.fail`).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from podrl.envs.host import HostVectorEnv
from podrl.envs.types import LAST, TimeStep
from podrl.core.keys import env_keys, host_env_seed, step_keys, update_keys
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.stopping import RunStopped, StopSignal
from podrl.sebulba.transport import example_trajectory, place_on_learners, stack_rollout, step_record
from podrl.core.types import Agent, EnvColumns, Trajectory, reset_finished_actor_state


class Rollout(NamedTuple):
    """What an actor thread hands the learner for one update."""

    trajectory: Trajectory  # [T, B_thread] on the learner devices
    version: int  # params version the actions were sampled with
    index: int  # rollout index (== the update that must consume it)
    episode_return_sum: float
    episode_length_sum: float
    episodes: int
    env_seconds: float
    inference_seconds: float


def make_act_step(agent: Agent) -> Callable:
    """A jitted `(params, actor_state, obs [B], step_keys [T], t) -> (action, extras, actor_state)`."""

    def act_step(params, actor_state, observation, step_keys, t):
        return agent.act(params, actor_state, observation, step_keys[t])

    return jax.jit(act_step)


def reset_env(env: HostVectorEnv, env_key: jax.Array, thread: int, total_envs: int, seed: int) -> TimeStep:
    """The first timestep of actor thread `thread` (global index): JAX host envs reset with slice `thread`
    of `env_keys(env_key, total_envs)` (Anakin's key tree), other envs with `host_env_seed(seed, thread)`."""
    reset_from_keys = getattr(env, "reset_from_keys", None)
    if reset_from_keys is not None:
        n = env.num_envs
        return reset_from_keys(env_keys(env_key, total_envs)[thread * n:(thread + 1) * n])
    return env.reset(host_env_seed(seed, thread))


def warm_up(agent: Agent, act_step, params, first: TimeStep, device, length: int) -> Trajectory:
    """Compiles `act_step` for `device`; returns a zero Trajectory shaped like one rollout."""
    params = jax.device_put(params, device)
    batch = first.observation.shape[0]
    actor_state = jax.device_put(agent.init_actor_state(batch), device)
    keys = jax.device_put(step_keys(jax.random.key(0), length), device)
    action, extras, _ = jax.device_get(act_step(params, actor_state, first.observation, keys, 0))
    flags = np.zeros(batch, np.float32)  # reward, discount, truncated: cast by the transport
    step = step_record(first.observation, action, flags, flags, flags, first.observation, extras)
    return example_trajectory(step, jax.device_get(agent.init_actor_state(batch)), length)


class ActorPolicy(NamedTuple):
    """How the actor threads of one actor device act (built once in the main thread)."""

    agent: Agent
    act_step: Callable  # `make_act_step(agent)`, compiled for `device`
    device: jax.Device  # the actor device inference runs on
    device_slot: int  # its index among the actor devices (`ParamsSource.for_rollout`)
    rollout_length: int  # steps per rollout
    shardings: Trajectory  # where a rollout goes on the learner devices (`transport.learner_shardings`)


class ActorLink(NamedTuple):
    """What ties an actor thread to the learner: the params it reads, the queue it fills, the run's stop."""

    source: ParamsSource
    out: queue.Queue
    stop: StopSignal
    timeout: float  # seconds any blocking wait may take


class ActorThread(threading.Thread):
    """One actor: env batch + queue + key; runs rollouts `rollouts` (a range of update indices).

    Args:
      index: the thread's index on this process. env / first: its env batch and the reset's timestep.
      policy: how it acts. link: params in, rollouts out, the stop signal.
      base_key: its PRNG base key (`podrl.core.keys.base_key`). rollouts: the rollout indices it produces.
      columns: the run's env columns its envs are (`podrl.core.types.EnvColumns`), told to `init_actor_state`.
    """

    def __init__(self, index: int, env: HostVectorEnv, first: TimeStep, policy: ActorPolicy, link: ActorLink,
                 base_key: jax.Array, rollouts: range, columns: EnvColumns | None = None):
        super().__init__(name=f"sebulba-actor-{index}", daemon=True)
        self.index, self.env, self.timestep, self.policy, self.link = index, env, first, policy, link
        self.base_key, self.rollouts = base_key, rollouts
        self.out, self.stop = link.out, link.stop
        self.actor_state = jax.device_put(policy.agent.init_actor_state(env.num_envs, columns), policy.device)
        self.initial_actor_state = self.actor_state
        self.stage, self.stage_since = "starting", time.monotonic()
        self.put_wait_seconds = 0.0  # total time blocked on a full queue
        self.params_wait_seconds = 0.0  # total time waiting for the params version the protocol asks for

    def describe(self) -> str:
        """Where the thread is, for timeout messages."""
        return (f"actor thread {self.index} has been in stage '{self.stage}' for "
                f"{time.monotonic() - self.stage_since:.1f}s (alive={self.is_alive()})")

    def _enter(self, stage: str) -> None:
        self.stage, self.stage_since = stage, time.monotonic()

    def run(self) -> None:
        try:
            for i in self.rollouts:
                self._enter("waiting for params")
                start = time.perf_counter()
                params, version = self.link.source.for_rollout(i, self.policy.device_slot)
                self.params_wait_seconds += time.perf_counter() - start
                rollout = self._rollout(params, version, i)
                self._enter("queue put")
                start = time.perf_counter()
                self.stop.put(self.out, rollout, self.link.timeout, f"rollout {i} of actor thread {self.index}")
                self.put_wait_seconds += time.perf_counter() - start
            self._enter("done")
        except RunStopped:
            self._enter("stopped")
        except BaseException as error:  # noqa: BLE001 - every failure must stop the run
            self._enter("failed")
            self.stop.fail(self.name, error)

    def _rollout(self, params: Any, version: int, index: int) -> Rollout:
        policy = self.policy
        rollout_key, _ = update_keys(self.base_key, index)
        keys = jax.device_put(step_keys(rollout_key, policy.rollout_length), policy.device)
        start_actor_state = self.actor_state
        steps, env_s, infer_s = [], 0.0, 0.0
        returns, lengths, episodes = 0.0, 0.0, 0
        for t in range(policy.rollout_length):
            self.stop.check()
            self._enter("inference")
            t0 = time.perf_counter()
            observation = self.timestep.observation
            action, extras, actor_state = policy.act_step(params, self.actor_state, observation, keys, t)
            action, extras = jax.device_get((action, extras))
            t1 = time.perf_counter()
            self._enter("env.step")
            ts = self.env.step(action)
            t2 = time.perf_counter()
            env_s, infer_s = env_s + (t2 - t1), infer_s + (t1 - t0)
            last = np.asarray(ts.step_type) == LAST
            ended = last | (np.asarray(ts.discount) == 0)  # Trajectory.episode_end (a lost life, too)
            self.actor_state = reset_finished_actor_state(actor_state, ended, self.initial_actor_state)
            steps.append(step_record(observation, action, ts.reward, ts.discount, ts.extras["truncated"],
                                     ts.extras["next_obs"], extras))
            if last.any():
                returns += float(np.sum(ts.extras["episode_return"][last]))
                lengths += float(np.sum(ts.extras["episode_length"][last]))
                episodes += int(last.sum())
            self.timestep = ts
        self._enter("shipping trajectory")
        trajectory = place_on_learners(stack_rollout(steps, jax.device_get(start_actor_state)), policy.shardings)
        return Rollout(trajectory, version, index, returns, lengths, episodes, env_s, infer_s)


JOIN_GRACE_S = 1.0
"""How long the learner waits, in all, for stopped actor threads to finish (they wake within a 0.05 s poll slice)."""


class ActorPool:
    """This process's actor threads and their queues: started together, consumed in thread order, stopped together.

    The envs are the pool's: `close` stops and joins every thread, then closes every env (and any env
    added to `envs` later, e.g. the evaluation batch).
    """

    def __init__(self, threads: list[ActorThread], envs: list[HostVectorEnv], stop: StopSignal, timeout: float):
        self.threads, self.envs, self.stop, self.timeout = threads, envs, stop, timeout

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def take(self, update: int) -> list[Rollout]:
        """Rollout `update` of every thread, in thread order (a worker's error or a timeout is raised here)."""
        return [self._take(thread, update) for thread in self.threads]

    def _take(self, thread: ActorThread, update: int) -> Rollout:
        rollout = self.stop.get(thread.out, self.timeout, f"rollout {update} from actor thread {thread.index}",
                                on_timeout=thread.describe)
        assert rollout.index == update, f"actor thread {thread.index} sent rollout {rollout.index}, expected {update}"
        return rollout

    def close(self) -> None:
        """Stops and joins every thread, closes every env.

        Healthy threads see the stop signal within a poll slice; a thread stuck in its env (the
        usual reason a run stops on a timeout) never will, so the joins share one short deadline
        instead of waiting `timeout` for it: the error reaches the user at once and the stuck
        daemon thread dies with the process.
        """
        self.stop.stop()
        deadline = time.monotonic() + min(self.timeout, JOIN_GRACE_S)
        for thread in self.threads:
            if thread.is_alive():
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
        for env in self.envs:
            env.close()
