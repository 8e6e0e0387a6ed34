"""Sebulba actor threads: step host envs, infer on an actor device, ship rollouts.

An actor thread owns one `HostVectorEnv` (created in the main thread), one
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

from envs.host import HostVectorEnv
from envs.types import LAST, TimeStep
from podrl.keys import step_keys, update_keys
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.stopping import RunStopped, StopSignal
from podrl.sebulba.transport import place_on_learners, stack_rollout, step_record
from podrl.types import Agent, Trajectory, reset_finished_actor_state


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


class ActorThread(threading.Thread):
    """One actor: env batch + queue + key; runs rollouts `rollouts` (a range of update indices)."""

    def __init__(self, *, index: int, env: HostVectorEnv, first: TimeStep, agent: Agent, act_step: Callable,
                 device: jax.Device, device_slot: int, source: ParamsSource, out: queue.Queue,
                 stop: StopSignal, base_key: jax.Array, rollout_length: int, rollouts: range,
                 shardings: Trajectory, timeout: float):
        super().__init__(name=f"sebulba-actor-{index}", daemon=True)
        self.index, self.env, self.timestep, self.agent = index, env, first, agent
        self.act_step, self.device, self.device_slot = act_step, device, device_slot
        self.source, self.out, self.stop = source, out, stop
        self.base_key, self.rollout_length, self.rollouts = base_key, rollout_length, rollouts
        self.shardings, self.timeout = shardings, timeout
        self.actor_state = jax.device_put(agent.init_actor_state(env.num_envs), device)
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
                params, version = self.source.for_rollout(i, self.device_slot)
                self.params_wait_seconds += time.perf_counter() - start
                rollout = self._rollout(params, version, i)
                self._enter("queue put")
                start = time.perf_counter()
                self.stop.put(self.out, rollout, self.timeout, f"rollout {i} of actor thread {self.index}")
                self.put_wait_seconds += time.perf_counter() - start
            self._enter("done")
        except RunStopped:
            self._enter("stopped")
        except BaseException as error:  # noqa: BLE001 - every failure must stop the run
            self._enter("failed")
            self.stop.fail(self.name, error)

    def _rollout(self, params: Any, version: int, index: int) -> Rollout:
        rollout_key, _ = update_keys(self.base_key, index)
        keys = jax.device_put(step_keys(rollout_key, self.rollout_length), self.device)
        start_actor_state = self.actor_state
        steps, env_s, infer_s = [], 0.0, 0.0
        returns, lengths, episodes = 0.0, 0.0, 0
        for t in range(self.rollout_length):
            self.stop.check()
            self._enter("inference")
            t0 = time.perf_counter()
            observation = self.timestep.observation
            action, extras, actor_state = self.act_step(params, self.actor_state, observation, keys, t)
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
        trajectory = place_on_learners(stack_rollout(steps, jax.device_get(start_actor_state)), self.shardings)
        return Rollout(trajectory, version, index, returns, lengths, episodes, env_s, infer_s)
