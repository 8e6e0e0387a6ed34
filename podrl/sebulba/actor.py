"""Sebulba actor threads: step host envs, infer on an actor device, ship rollouts.

An actor thread owns one `HostVectorEnv` (created in the main thread), one
bounded queue and one PRNG key. For rollout `i` it takes params from the
`ParamsSource` (the staleness protocol lives there), acts `rollout_length` steps,
places the `[T, B]` Trajectory on the learner devices split along the batch axis,
and puts it on its queue. Any exception stops the whole run (`StopSignal.fail`).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, NamedTuple

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from envs.host import HostVectorEnv
from envs.types import TimeStep
from podrl.keys import step_keys, update_keys
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.stopping import RunStopped, StopSignal
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

    def __init__(self, index: int, env: HostVectorEnv, first: TimeStep, agent: Agent, act_step: Callable,
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
        records, env_s, infer_s = [], 0.0, 0.0
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
            last = np.asarray(ts.step_type) == 2
            self.actor_state = reset_finished_actor_state(actor_state, last, self.initial_actor_state)
            records.append((observation, action, ts.reward, ts.discount, ts.extras["truncated"],
                            ts.extras["next_obs"], extras))
            if last.any():
                returns += float(np.sum(ts.extras["episode_return"][last]))
                lengths += float(np.sum(ts.extras["episode_length"][last]))
                episodes += int(last.sum())
            self.timestep = ts
        self._enter("shipping trajectory")
        trajectory = place_on_learners(_stack(records, jax.device_get(start_actor_state)), self.shardings)
        return Rollout(trajectory, version, index, returns, lengths, episodes, env_s, infer_s)


def _stack(records: list[tuple], actor_state: Any) -> Trajectory:
    """Per-step numpy records -> a time-major numpy Trajectory `[T, B, ...]`."""
    obs, action, reward, discount, truncated, next_obs, extras = zip(*records)
    return Trajectory(
        observation=np.stack(obs),
        action=np.stack(action),
        reward=np.stack(reward).astype(np.float32),
        discount=np.stack(discount).astype(np.float32),
        truncated=np.stack(truncated).astype(np.bool_),
        next_observation=np.stack(next_obs),
        agent_extras=jax.tree.map(lambda *xs: np.stack(xs), *extras),
        actor_state=actor_state,
    )


def place_on_learners(trajectory: Trajectory, shardings: Trajectory) -> Trajectory:
    """This process's numpy `[T, B]` rollout -> a global array split along B over the
    learner devices of every process (each process contributes its own rows)."""
    return jax.tree.map(lambda x, s: jax.make_array_from_process_local_data(s, np.asarray(x)),
                        trajectory, shardings)


def trajectory_shardings(mesh, data_axis: str, example: Trajectory) -> Trajectory:
    """Learner shardings: `[T, B]` fields split along B, actor state along its leading B."""
    time_major = NamedSharding(mesh, P(None, data_axis))
    batch_major = NamedSharding(mesh, P(data_axis))
    return Trajectory(
        observation=time_major, action=time_major, reward=time_major, discount=time_major,
        truncated=time_major, next_observation=time_major,
        agent_extras=jax.tree.map(lambda _: time_major, example.agent_extras),
        actor_state=jax.tree.map(lambda _: batch_major, example.actor_state),
    )
