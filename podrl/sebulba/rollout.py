"""Sebulba actor threads: step host envs, infer on an actor device, ship rollouts.

An actor thread owns `env_groups` `HostVectorEnv`s (its env groups, built before the run,
`podrl.sebulba.setup`, and reset here, `reset_env`, with its inference compiled in the main
thread, `warm_up`), one bounded queue and one PRNG key. For rollout `i` it takes params from
the `ParamsSource` (the staleness protocol lives there), acts `rollout_length` steps with
every group, writes them into a `RolloutBuffer`, places the `[T, B]` Trajectory on the
learner devices split along the batch axis (`podrl.sebulba.transport`), and puts it on its
queue. Any exception stops the whole run (`StopSignal.fail`).

The step loop (`ActorThread._collect`) is a pipeline over the groups: in turn `k`, group
`g = k mod G` receives its env step, records it and dispatches its next inference (JAX
dispatch returns at once; the action's copy to the host starts as soon as it is computed,
`copy_to_host_async` of the one byte vector that holds its actions and agent extras,
`podrl.sebulba.host_copy`); then group `g + 1` fetches its actions, computed meanwhile, and starts
its env step (`step_async` where the env has it: ale-py's and envpool's C++ threads,
gymnasium's worker processes; else `step`). So with two groups one group's envs step while
the other group's inference runs (Sample Factory's double-buffered sampling), and with a
`step_async` env the thread's own bookkeeping overlaps env stepping too. With one group the
same loop is today's exact sequence: act on all envs with key `t` of `step_keys`, step,
record; the values (and so the parity with Anakin at lag 0) are unchanged. Several groups
sample with other keys (`podrl.core.keys.group_step_keys`) and act on fewer envs per call,
so their trajectories are a different (equally valid) sample.
"""

from __future__ import annotations

import collections
import functools
import os
import queue
import threading
import time
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from podrl.core.keys import env_keys, group_step_keys, host_env_seed, step_keys, update_keys
from podrl.core.types import Agent, EnvColumns, Trajectory, reset_finished_actor_state
from podrl.envs.host import HostVectorEnv
from podrl.envs.types import LAST, TimeStep
from podrl.sebulba.host_copy import ActStep
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.stopping import RunStopped, StopSignal
from podrl.sebulba.transport import RolloutBuffer, example_trajectory, place_on_learners, step_record


class Rollout(NamedTuple):
    """What an actor thread hands the learner for one update."""

    trajectory: Trajectory  # [T, B_thread] on the learner devices
    version: int  # params version the actions were sampled with
    index: int  # rollout index (== the update that must consume it)
    episode_return_sum: float
    episode_length_sum: float
    episodes: int
    env_seconds: float  # blocked in env calls (step, or step_async + step_wait)
    inference_seconds: float  # dispatching inference and waiting for its actions
    transfer_seconds: float = 0.0  # placing the finished rollout on the learner devices
    buffer: Any = None  # the RolloutBuffer it was written in, until the learner hands it back (ActorPool.recycle)


def make_act_step(agent: Agent) -> ActStep:
    """A jitted `(params, actor_state, obs [B], step_keys [T], t) -> (packed action and extras, actor_state)`;
    its `unpack(host bytes) -> (action, extras)` (`podrl.sebulba.host_copy`)."""
    return ActStep(agent)


@functools.lru_cache(maxsize=None)
def rollout_step_keys(length: int, groups: int) -> Callable:
    """A jitted `(actor thread's base key, rollout index) -> [groups]` lists of `[length]` step keys (one
    dispatch per rollout, the same bits as the eager ops), shared by every thread; `warm_up` compiles it."""
    return jax.jit(lambda key, i: group_step_keys(update_keys(key, i)[0], length, groups))


def reset_env(env: HostVectorEnv, env_key: jax.Array, thread: int, total_envs: int, seed: int,
              offset: int = 0, thread_envs: int | None = None) -> TimeStep:
    """The first timestep of an env batch of actor thread `thread` (global index) whose first env is the
    thread's env `offset` (env groups: `offset = group * group_size`; `thread_envs`: the thread's env
    count, default `env.num_envs`). JAX host envs reset with their rows of `env_keys(env_key,
    total_envs)` (Anakin's key tree), other envs with `host_env_seed(seed, thread) + offset` (env i
    of a gymnasium batch takes seed + i, so groups start as one batch would)."""
    reset_from_keys = getattr(env, "reset_from_keys", None)
    n = env.num_envs
    if reset_from_keys is not None:
        first = thread * (thread_envs or n) + offset
        return reset_from_keys(env_keys(env_key, total_envs)[first:first + n])
    return env.reset(host_env_seed(seed, thread) + offset)


def warm_up(agent: Agent, act_step: ActStep, params, first: TimeStep, device, length: int,
            groups: int = 1) -> Trajectory:
    """Compiles `act_step` for `device` on a batch like `first`, and the threads' `rollout_step_keys`, in the
    calling thread; returns a zero Trajectory shaped like one rollout of `groups` such batches."""
    params = jax.device_put(params, device)
    batch = first.reward.shape[0]
    actor_state = jax.device_put(agent.init_actor_state(batch), device)
    keys = jax.device_put(step_keys(jax.random.key(0), length), device)
    action, extras = act_step.unpack(np.asarray(act_step(params, actor_state, first.observation, keys, 0)[0]))
    jax.block_until_ready(rollout_step_keys(length, groups)(jax.random.key(0), 0))
    rows = lambda x: np.concatenate([np.asarray(x)] * groups)  # noqa: E731
    flags = np.zeros(batch * groups, np.float32)  # reward, discount, truncated: cast by the transport
    obs = jax.tree.map(rows, first.observation)
    step = step_record(obs, rows(action), flags, flags, flags, obs, jax.tree.map(rows, extras))
    return example_trajectory(step, jax.device_get(agent.init_actor_state(batch * groups)), length)


class ActorPolicy(NamedTuple):
    """How the actor threads of one actor device act (built once in the main thread)."""

    agent: Agent
    act_step: ActStep  # `make_act_step(agent)`, compiled for `device`
    device: jax.Device  # the actor device inference runs on
    device_slot: int  # its index among the actor devices (`ParamsSource.for_rollout`)
    rollout_length: int  # steps per rollout
    shardings: Trajectory  # where a rollout goes on the learner devices (`transport.learner_shardings`)
    example: Trajectory  # zeros shaped like one thread's rollout `[T, B]` (`warm_up`)


class ActorLink(NamedTuple):
    """What ties an actor thread to the learner: the params it reads, the queue it fills, the run's stop."""

    source: ParamsSource
    out: queue.Queue
    stop: StopSignal
    timeout: float  # seconds any blocking wait may take


class EnvGroup:
    """One env batch of an actor thread: its rows of the thread's batch, the timestep and actor state it
    carries from step to step, and the inference and env step it has in flight."""

    def __init__(self, env: HostVectorEnv, first: TimeStep, rows: slice, actor_state: Any):
        self.env, self.timestep, self.rows = env, first, rows
        self.actor_state = self.initial_actor_state = actor_state  # on the actor device
        self.native = callable(getattr(env, "step_async", None)) and callable(getattr(env, "step_wait", None))
        self.keys: Any = None  # this rollout's `[T]` step keys, on the actor device
        self.acting: Any = None  # (action, extras, actor_state) of the inference in flight
        self.next_actor_state: Any = None  # the actor state `act` returned for the step in flight
        self.result: TimeStep | None = None  # the timestep of a synchronous step
        self.stepping = False

    def send(self, action: np.ndarray) -> None:
        """Starts the env step (a synchronous env steps here)."""
        if self.native:
            self.env.step_async(action)
        else:
            self.result = self.env.step(action)
        self.stepping = True

    def recv(self) -> TimeStep:
        """The timestep of the step `send` started."""
        self.stepping = False
        if self.native:
            return self.env.step_wait()
        result, self.result = self.result, None
        return result

    def drain(self) -> None:
        """Waits out a started step (the thread is leaving), so that the env can be closed."""
        if self.stepping and self.native:
            self.stepping = False
            try:
                self.env.step_wait()
            except Exception:  # noqa: BLE001 - the run is stopping; the first error is already recorded
                pass


class _Tally:
    """What one rollout adds up: episodes that ended, and seconds per stage."""

    def __init__(self):
        self.returns = self.lengths = self.env_s = self.infer_s = 0.0
        self.episodes = 0


def _group_columns(columns: EnvColumns | None, group: int, size: int) -> EnvColumns | None:
    """The env columns of group `group` (rows `group * size + [0, size)`) of a thread's `columns`."""
    if columns is None:
        return None
    return EnvColumns(columns.index[group * size:(group + 1) * size], columns.total)


class ActorThread(threading.Thread):
    """One actor: env groups + queue + key; runs rollouts `rollouts` (a range of update indices).

    Args:
      index: the thread's index on this process. envs / firsts: its env groups (one or more
        `HostVectorEnv`s of equal size) and their resets' timesteps.
      policy: how it acts. link: params in, rollouts out, the stop signal.
      base_key: its PRNG base key (`podrl.core.keys.base_key`). rollouts: the rollout indices it produces.
      cpu: the CPU core the thread pins itself to (Linux `sched_setaffinity`), or None.
      columns: the run's env columns of its envs, all groups in order (`podrl.core.types.EnvColumns`);
        each group tells its share to `init_actor_state`.
    """

    def __init__(self, index: int, envs: list[HostVectorEnv], firsts: list[TimeStep], policy: ActorPolicy,
                 link: ActorLink, base_key: jax.Array, rollouts: range, cpu: int | None = None,
                 columns: EnvColumns | None = None):
        super().__init__(name=f"sebulba-actor-{index}", daemon=True)
        self.index, self.policy, self.link, self.cpu = index, policy, link, cpu
        self.base_key, self.rollouts = base_key, rollouts
        self.out, self.stop = link.out, link.stop
        size = envs[0].num_envs
        self.groups = [EnvGroup(env, first, slice(g * size, (g + 1) * size),
                                jax.device_put(policy.agent.init_actor_state(
                                    size, _group_columns(columns, g, size)), policy.device))
                       for g, (env, first) in enumerate(zip(envs, firsts, strict=True))]
        self._step_keys = rollout_step_keys(policy.rollout_length, len(envs))  # rollout i's, one list per group
        self.free_buffers: collections.deque[RolloutBuffer] = collections.deque()  # handed back by the learner
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
            if self.cpu is not None:
                os.sched_setaffinity(0, {self.cpu})  # pid 0: this thread only
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
        finally:
            for group in self.groups:
                group.drain()

    def _rollout(self, params: Any, version: int, index: int) -> Rollout:
        policy, groups = self.policy, self.groups
        keys = self._step_keys(self.base_key, index)
        for group, group_keys in zip(groups, keys):
            group.keys = jax.device_put(group_keys, policy.device)
        start_states = jax.device_get([group.actor_state for group in groups])
        buffer = self.free_buffers.popleft() if self.free_buffers else RolloutBuffer(policy.example)
        tally = _Tally()
        self._collect(params, buffer, tally)
        self._enter("shipping trajectory")
        start = time.perf_counter()
        actor_state = start_states[0] if len(groups) == 1 else jax.tree.map(
            lambda *xs: np.concatenate(xs), *start_states)
        trajectory = place_on_learners(buffer.trajectory(actor_state), policy.shardings)
        return Rollout(trajectory, version, index, tally.returns, tally.lengths, tally.episodes, tally.env_s,
                       tally.infer_s, time.perf_counter() - start, buffer)

    def _collect(self, params: Any, buffer: RolloutBuffer, tally: _Tally) -> None:
        """Every group's `rollout_length` steps into `buffer`, pipelined over the groups (module docstring)."""
        groups, length = self.groups, self.policy.rollout_length
        turns = len(groups) * length
        for group in groups:
            self._infer(group, params, buffer, 0, tally)
        self._act(groups[0], buffer, 0, tally)
        for k in range(turns):
            self.stop.check()
            group, t = groups[k % len(groups)], k // len(groups)
            self._finish_step(group, buffer, t, tally)
            if t + 1 < length:
                self._infer(group, params, buffer, t + 1, tally)
            if k + 1 < turns:
                self._act(groups[(k + 1) % len(groups)], buffer, (k + 1) // len(groups), tally)

    def _infer(self, group: EnvGroup, params: Any, buffer: RolloutBuffer, t: int, tally: _Tally) -> None:
        """Records the group's observation of step `t` and dispatches its inference (returns at once)."""
        buffer.write_observation(t, group.rows, group.timestep.observation)
        self._enter("inference")
        start = time.perf_counter()
        acting = self.policy.act_step(params, group.actor_state, buffer.observation(t, group.rows), group.keys, t)
        acting[0].copy_to_host_async()  # the actions and extras, packed in one byte vector
        group.acting = acting
        tally.infer_s += time.perf_counter() - start

    def _act(self, group: EnvGroup, buffer: RolloutBuffer, t: int, tally: _Tally) -> None:
        """Fetches the group's actions of step `t`, starts its env step, records what it did."""
        self._enter("inference")
        start = time.perf_counter()
        (packed, group.next_actor_state), group.acting = group.acting, None
        action, extras = self.policy.act_step.unpack(np.asarray(packed))
        fetched = time.perf_counter()
        self._enter("env.step")
        group.send(action)
        tally.infer_s += fetched - start
        tally.env_s += time.perf_counter() - fetched
        buffer.write_acted(t, group.rows, action, extras)

    def _finish_step(self, group: EnvGroup, buffer: RolloutBuffer, t: int, tally: _Tally) -> None:
        """Receives the group's env step `t` and records its result."""
        self._enter("env.step")
        start = time.perf_counter()
        ts = group.recv()
        tally.env_s += time.perf_counter() - start
        last = np.asarray(ts.step_type) == LAST
        ended = last | (np.asarray(ts.discount) == 0)  # Trajectory.episode_end (a lost life, too)
        group.actor_state = reset_finished_actor_state(group.next_actor_state, ended, group.initial_actor_state)
        buffer.write_result(t, group.rows, ts.reward, ts.discount, ts.extras["truncated"], ts.extras["next_obs"])
        if last.any():
            tally.returns += float(np.sum(ts.extras["episode_return"][last]))
            tally.lengths += float(np.sum(ts.extras["episode_length"][last]))
            tally.episodes += int(last.sum())
        group.timestep = ts


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

    def recycle(self, rollouts: list[Rollout]) -> None:
        """Hands each rollout's buffer back to its thread, to be written again: call once the update that
        consumed them has finished on every learner device (its new params are ready). On CPU the learner's
        trajectory arrays alias the buffer (zero-copy), so nothing may keep a consumed rollout's arrays."""
        for thread, rollout in zip(self.threads, rollouts, strict=True):
            if rollout.buffer is not None:
                thread.free_buffers.append(rollout.buffer)

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
