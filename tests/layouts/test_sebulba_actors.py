"""The Sebulba actor pipeline (`podrl.sebulba.rollout`): env groups that alternate, envs stepped with
`step_async`/`step_wait`, rollouts written into aligned buffers.

An actor thread runs here on its own (`run_actor`: no learner, version 0 params) against a
counting env whose observations say which env, which episode and which step they are, and an
agent whose action is a fixed function of the observation, so every trajectory can be checked
row by row: each env's steps in order, nothing dropped or repeated across rollouts, episode
ends where the env put them, actions taken on the observation they were computed from (the env
itself refuses any other), each group sampling with its own step keys. Then whole runs with two
groups: determinism, failures (test_sebulba.py runs the staleness protocol and the policy-lag
fingerprint test with two groups too); and
the opt-in pinning of actor threads (`actor_cpus`) and env worker threads (`thread_affinity_offset`).
"""

from __future__ import annotations

import os
import queue
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs

from parity import sebulba_threads, tiny
from podrl.agents.ppo import PPOConfig
from podrl.core.keys import group_step_keys, update_keys
from podrl.core.mesh import data_mesh
from podrl.core.types import Agent, TrainState
from podrl.envs.adapters.make import make_host_env
from podrl.envs.types import FIRST, LAST, MID, EnvSpec, TimeStep
from podrl.sebulba import SebulbaConfig, train_sebulba
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.rollout import ActorLink, ActorPolicy, ActorThread, make_act_step, warm_up
from podrl.sebulba.stopping import StopSignal
from podrl.sebulba.transport import ALIGNMENT, RolloutBuffer, learner_shardings

NUM_ACTIONS = 4


def episode_length(env_id: int) -> int:
    """Env `env_id`'s episodes last this many steps (2..6, different for neighbours)."""
    return 2 + env_id % 5


def policy_action(observation):
    """The action every test agent takes on `observation` `[B, 3]` = (env id, step, episode)."""
    return (observation[..., 0].astype(jnp.int32) * 3 + observation[..., 1].astype(jnp.int32)) % NUM_ACTIONS


class CountingEnv:
    """`num_envs` host envs with ids `first_id..`: observation (id, step in episode, episode), float32 `[B, 3]`.

    Env `i`'s episodes last `episode_length(i)` steps and end terminated (even ids, discount 0) or
    truncated (odd ids); reward = the step's index in its episode + 1. `step` refuses an action that
    is not `policy_action` of the observation it last returned (unless `check_actions` is False: agents
    that sample). With `native` it steps through
    `step_async`/`step_wait`, doing the work in a helper thread (`delay` seconds per step).
    """

    def __init__(self, first_id: int, num_envs: int, native: bool = False, delay: float = 0.0,
                 check_actions: bool = True):
        self.ids, self.num_envs, self.delay = first_id + np.arange(num_envs), num_envs, delay
        self.check_actions = check_actions
        self.lengths = np.array([episode_length(i) for i in self.ids])
        self.step_count = self.episode = None
        self.steps_taken = 0
        if native:
            self.step_async, self.step_wait = self._step_async, self._step_wait
            self._worker: threading.Thread | None = None

    def observation_spec(self):
        return specs.Array((3,), np.float32)

    def action_spec(self):
        return specs.DiscreteArray(NUM_ACTIONS, dtype=np.int32)

    def _obs(self) -> np.ndarray:
        return np.stack([self.ids, self.step_count, self.episode], axis=1).astype(np.float32)

    def reset(self, seed: int) -> TimeStep:
        self.step_count, self.episode = np.zeros(self.num_envs, np.int64), np.zeros(self.num_envs, np.int64)
        zeros = np.zeros(self.num_envs, np.float32)
        extras = {"next_obs": self._obs(), "truncated": zeros.astype(bool), "episode_return": zeros,
                  "episode_length": zeros.astype(np.int32)}
        return TimeStep(np.full(self.num_envs, FIRST, np.int32), zeros, zeros + 1, self._obs(), extras)

    def step(self, actions) -> TimeStep:
        expected = np.asarray(policy_action(self._obs()))
        if self.check_actions and not np.array_equal(np.asarray(actions), expected):
            raise AssertionError(f"envs {self.ids}: actions {actions} were not computed from their observations")
        if self.delay:
            time.sleep(self.delay)
        self.steps_taken += 1
        self.step_count += 1
        reward = self.step_count.astype(np.float32)
        ended = self.step_count == self.lengths
        terminated, truncated = ended & (self.ids % 2 == 0), ended & (self.ids % 2 == 1)
        next_obs = self._obs()
        returns = (self.step_count * (self.step_count + 1) / 2).astype(np.float32)
        lengths = self.step_count.astype(np.int32)
        self.step_count = np.where(ended, 0, self.step_count)
        self.episode = np.where(ended, self.episode + 1, self.episode)
        extras = {"next_obs": next_obs, "truncated": truncated, "episode_return": returns, "episode_length": lengths}
        return TimeStep(np.where(ended, LAST, MID).astype(np.int32), reward, (~terminated).astype(np.float32),
                        self._obs(), extras)

    def _step_async(self, actions) -> None:
        result: list = []

        def work():
            try:
                result.append(self.step(actions))
            except BaseException as e:  # noqa: BLE001 - handed to step_wait
                result.append(e)

        self._worker = threading.Thread(target=work, daemon=True)
        self._worker.result = result
        self._worker.start()

    def _step_wait(self) -> TimeStep:
        worker, self._worker = self._worker, None
        worker.join()
        if isinstance(worker.result[0], BaseException):
            raise worker.result[0]
        return worker.result[0]

    def close(self) -> None:
        pass


def counting_agent() -> Agent:
    """Acts `policy_action(observation)`; extras: the observation it saw and a uniform draw from its key."""

    def init(key, spec):
        return TrainState(params={"w": jnp.zeros(())}, opt_state=(), update_step=jnp.zeros((), jnp.int32))

    def act(params, actor_state, observation, key):
        noise = jax.random.uniform(key, observation.shape[:1])
        return policy_action(observation), {"seen": observation, "noise": noise}, actor_state

    return Agent(init=init, init_actor_state=lambda b, columns=None: (), act=act,
                 act_greedy=lambda p, s, o: (policy_action(o), s), update=lambda s, t, k: (s, {}))


def run_actor(envs, rollouts: int, length: int, agent: Agent | None = None, cpu: int | None = None,
              recycle: bool = False):
    """Runs one ActorThread over `envs` (its groups; pinned to core `cpu`) for `rollouts` rollouts with
    version-0 params; returns `(rollouts, thread)` with every trajectory copied to numpy. With `recycle`
    the queue holds one rollout and each consumed rollout's buffer goes back to the thread, as the
    learner does (`ActorPool.recycle`)."""
    devices = jax.devices("cpu")
    agent = agent or counting_agent()
    spec = EnvSpec(envs[0].observation_spec(), envs[0].action_spec())
    firsts = [env.reset(0) for env in envs]
    act_step = make_act_step(agent)
    params = jax.device_put(agent.init(jax.random.key(0), spec).params, devices[0])
    example = warm_up(agent, act_step, params, firsts[0], devices[0], length, len(envs))
    policy = ActorPolicy(agent, act_step, devices[0], 0, length, learner_shardings(data_mesh([devices[1]]), example),
                         example)
    stop = StopSignal()
    source = ParamsSource([devices[0]], None, stop, timeout=20.0)
    source.publish(params, 0)
    link = ActorLink(source, queue.Queue(maxsize=1 if recycle else rollouts), stop, 20.0)
    thread = ActorThread(0, envs, firsts, policy, link, jax.random.key(7), range(rollouts), cpu)
    thread.start()
    got = []
    try:
        for i in range(rollouts):
            rollout = stop.get(link.out, 30.0, f"rollout {i}")
            got.append(rollout._replace(trajectory=jax.tree.map(lambda x: np.array(x, copy=True), rollout.trajectory)))
            if recycle:
                thread.free_buffers.append(rollout.buffer)
    finally:
        stop.stop()
        thread.join(10)
    assert not thread.is_alive()
    return got, thread


def check_rows(rollouts, num_envs: int, length: int) -> None:
    """Every env row of the concatenated rollouts steps through its episodes in order, none dropped or repeated."""
    traj = [r.trajectory for r in rollouts]
    obs = np.concatenate([t.observation for t in traj])  # [R*T, B, 3]
    nxt = np.concatenate([t.next_observation for t in traj])
    reward, discount = np.concatenate([t.reward for t in traj]), np.concatenate([t.discount for t in traj])
    truncated = np.concatenate([t.truncated for t in traj])
    action = np.concatenate([t.action for t in traj])
    seen = np.concatenate([t.agent_extras["seen"] for t in traj])
    assert obs.shape == (len(rollouts) * length, num_envs, 3)
    for b in range(num_envs):
        env_id = b  # the tests number a thread's envs 0..B-1 in row order
        n = episode_length(env_id)
        steps = np.arange(len(obs))
        np.testing.assert_array_equal(obs[:, b, 0], env_id)
        np.testing.assert_array_equal(obs[:, b, 1], steps % n)  # in order, none dropped or repeated
        np.testing.assert_array_equal(obs[:, b, 2], steps // n)
        ends = (steps % n) == n - 1
        np.testing.assert_array_equal(reward[:, b], steps % n + 1)
        np.testing.assert_array_equal(discount[:, b], np.where(ends & (env_id % 2 == 0), 0.0, 1.0))
        np.testing.assert_array_equal(truncated[:, b], ends & (env_id % 2 == 1))
        np.testing.assert_array_equal(nxt[:, b, 1], steps % n + 1)  # the observation the action led to
        np.testing.assert_array_equal(nxt[:-1, b][~ends[:-1]], obs[1:, b][~ends[:-1]])
    np.testing.assert_array_equal(seen, obs)  # acted on the observation recorded with it
    np.testing.assert_array_equal(action, np.asarray(policy_action(obs)))
    episodes = sum(r.episodes for r in rollouts)
    assert episodes == sum(len(obs) // episode_length(b) for b in range(num_envs))


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("native", [False, True], ids=["step", "step_async"])
def test_group_rollouts_hold_every_env_step_in_order(cpu_devices, groups, native):
    num_envs, length, rollouts = 8, 5, 4
    size = num_envs // groups
    envs = [CountingEnv(g * size, size, native=native, delay=0.002 if native else 0.0) for g in range(groups)]
    got, thread = run_actor(envs, rollouts, length)
    assert [r.index for r in got] == list(range(rollouts)) and all(r.version == 0 for r in got)
    check_rows(got, num_envs, length)
    assert all(env.steps_taken == rollouts * length for env in envs)  # no step taken beyond the rollouts
    # each group samples with its own step keys: group g's rows, step t, draw from key t of its keys
    for i, r in enumerate(got):
        rollout_key, _ = update_keys(jax.random.key(7), i)
        for g, keys in enumerate(group_step_keys(rollout_key, length, groups)):
            draws = np.stack([np.asarray(jax.random.uniform(keys[t], (size,))) for t in range(length)])
            np.testing.assert_array_equal(r.trajectory.agent_extras["noise"][:, g * size:(g + 1) * size], draws)
    assert all(r.env_seconds > 0 and r.inference_seconds > 0 for r in got)


@pytest.mark.parametrize("groups", [1, 2])
def test_recycled_buffers_hold_every_env_step_in_order(cpu_devices, groups):
    """Buffers the consumer hands back are written again, and every rollout is still whole and in order."""
    envs = [CountingEnv(g * (8 // groups), 8 // groups, native=True) for g in range(groups)]
    got, _ = run_actor(envs, rollouts=6, length=5, recycle=True)
    check_rows(got, 8, 5)
    assert len({id(r.buffer) for r in got}) < len(got)


def test_one_group_samples_with_the_rollout_step_keys(cpu_devices):
    """One group is the classic loop: step t of every env samples with key t of `step_keys(rollout_key)`."""
    from podrl.core.keys import step_keys

    got, _ = run_actor([CountingEnv(0, 4)], rollouts=2, length=3)
    for i, r in enumerate(got):
        keys = step_keys(update_keys(jax.random.key(7), i)[0], 3)
        draws = np.stack([np.asarray(jax.random.uniform(keys[t], (4,))) for t in range(3)])
        np.testing.assert_array_equal(r.trajectory.agent_extras["noise"], draws)


def test_rollout_buffers_are_aligned_and_refuse_a_changed_field():
    from podrl.sebulba.transport import example_trajectory, step_record

    step = step_record(np.zeros((4, 3), np.uint8), np.zeros(4, np.int32), np.zeros(4), np.zeros(4), np.zeros(4),
                       np.zeros((4, 3), np.uint8), {"v": np.zeros(4, np.float32)})
    buffer = RolloutBuffer(example_trajectory(step, (), 5))
    assert all(leaf.ctypes.data % ALIGNMENT == 0 for leaf in jax.tree.leaves(buffer.steps))
    buffer.write_result(0, slice(0, 4), np.ones(4, np.float64), np.ones(4), np.zeros(4, np.int64),
                        np.ones((4, 3), np.uint8))  # reward, discount, truncated are cast
    assert buffer.steps.reward.dtype == np.float32 and buffer.steps.truncated.dtype == np.bool_
    with pytest.raises(ValueError, match=r"rollout field observation: expected uint8 \[2, 3\], got float32 \[2, 3\]"):
        buffer.write_observation(1, slice(0, 2), np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"rollout field action: expected int32 \[4\], got int32 \[3\]"):
        buffer.write_acted(1, slice(0, 4), np.zeros(3, np.int32), {"v": np.zeros(4, np.float32)})


@pytest.mark.parametrize("env_name, rollouts, length, episodes", [("envpool:CartPole-v1", 3, 16, True),
                                                                   ("ale:Pong", 2, 4, False)])
def test_step_async_backends_give_the_trajectories_of_step(cpu_devices, env_name, rollouts, length, episodes):
    """ale-py's and envpool's send/recv path (`step_async`/`step_wait`) yields bit-identical rollouts to
    plain `step` (the same env, seeds and keys), with two groups; on CartPole episodes end and restart."""

    class StepOnly:
        """An env seen without its step_async/step_wait."""

        def __init__(self, env):
            self.env, self.num_envs = env, env.num_envs

        def __getattr__(self, name):
            if name in ("step_async", "step_wait"):
                raise AttributeError(name)
            return getattr(self.env, name)

    agent = PPOConfig(torso="nature_cnn" if env_name.startswith("ale") else "mlp").make_agent(
        EnvSpec(*(lambda e: (e.observation_spec(), e.action_spec()))(make_host_env(env_name, 1))), 1)
    results = []
    for wrap in (lambda e: e, StepOnly):
        envs = [wrap(make_host_env(env_name, 2, seed=g)) for g in range(2)]
        assert all(callable(getattr(e, "step_async", None)) for e in envs) == (wrap is not StepOnly)
        got, _ = run_actor(envs, rollouts=rollouts, length=length, agent=agent)
        assert (sum(r.episodes for r in got) > 0) == episodes
        results.append(got)
        for env in envs:
            env.close()
    for a, b in zip(*results):
        for x, y in zip(jax.tree.leaves(a.trajectory), jax.tree.leaves(b.trajectory)):
            np.testing.assert_array_equal(x, y)


# ---------------------------------------------------------------- whole runs with env groups


@pytest.mark.timeout(240)
def test_two_groups_same_seed_same_params_and_another_sample_than_one(cpu_devices):
    config = tiny(lag="1", env_groups=2, eval_episodes=0)
    first, second = (train_sebulba(config, PPOConfig(num_minibatches=2)) for _ in range(2))
    one = train_sebulba(tiny(lag="1", eval_episodes=0), PPOConfig(num_minibatches=2))
    leaves = lambda r: [np.asarray(x) for x in jax.tree.leaves(jax.device_get(r.train_state.params))]  # noqa: E731
    for a, b in zip(leaves(first), leaves(second)):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(leaves(first), leaves(one)))


class ExplodingEnv(CountingEnv):
    """A CountingEnv (any actions) that raises from its 10th step on."""

    def step(self, actions):
        if self.steps_taken >= 9:
            raise RuntimeError(f"group of envs {self.ids} exploded")
        return super().step(actions)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("native", [False, True], ids=["step", "step_async"])
def test_a_failing_group_stops_the_run_with_its_error(cpu_devices, native):
    """Group 1 of thread 0 raises: the run stops with that error, naming the thread, and leaves no
    actor thread behind."""
    made = []

    def factory(j, n):
        kind = ExplodingEnv if len(made) == 1 else CountingEnv
        made.append(kind(n * len(made), n, native=native, check_actions=False))
        return made[-1]

    config = tiny(envs_per_thread=4, env_groups=2, rollout_length=4, total_steps=4 * 4 * 20, learner_devices=(1,),
                  lag="1", eval_episodes=0)
    with pytest.raises(RuntimeError, match=r"group of envs \[2 3\] exploded") as info:
        train_sebulba(config, PPOConfig(num_minibatches=2, hidden_sizes=(8,)), env_factory=factory)
    assert any("sebulba-actor-0" in note for note in info.value.__notes__)
    assert len(made) == 2 and made[0].steps_taken >= 9
    assert not sebulba_threads()


def test_env_groups_must_split_the_thread_batch():
    from podrl.core.errors import ConfigError

    with pytest.raises(ConfigError, match="env_groups"):
        SebulbaConfig(envs_per_thread=6, env_groups=4)
    with pytest.raises(ConfigError, match="env_groups"):
        SebulbaConfig(env_groups=0)


class AffinityEnv(CountingEnv):
    """A CountingEnv that records the CPU cores of the thread that steps it."""

    def step(self, actions):
        self.cores = os.sched_getaffinity(0)
        return super().step(actions)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU pinning is Linux-only")
def test_an_actor_thread_pins_itself_to_its_core(cpu_devices):
    core = max(os.sched_getaffinity(0))
    env = AffinityEnv(0, 4)
    run_actor([env], rollouts=1, length=2, cpu=core)
    assert env.cores == {core}
    if len(os.sched_getaffinity(0)) > 1:
        assert os.sched_getaffinity(0) != {core}  # only the actor thread was pinned


def test_actor_cpus_must_be_cores_of_this_process():
    from podrl.core.errors import ConfigError
    from podrl.sebulba.config import check_actor_cpus

    with pytest.raises(ConfigError, match="actor_cpus"):
        SebulbaConfig(actor_cpus=(0, 0))
    with pytest.raises(ConfigError, match=r"actor_cpus: core\(s\) \[4096\] are not among this process's cores"):
        check_actor_cpus((4096,))
    check_actor_cpus(tuple(sorted(os.sched_getaffinity(0)))[:1])


def test_env_thread_pinning_reaches_the_backends(monkeypatch):
    """thread_affinity_offset (opt-in) reaches ale-py's AtariVectorEnv and envpool; by default neither gets it."""
    import ale_py

    from podrl.envs.adapters.atari import atari_protocol, envpool_kwargs

    seen = []
    original = ale_py.AtariVectorEnv.__init__

    def recording(self, game, num_envs, **kwargs):
        seen.append(kwargs)
        original(self, game, num_envs, **kwargs)

    monkeypatch.setattr(ale_py.AtariVectorEnv, "__init__", recording)
    make_host_env("ale:Pong", 1).close()
    make_host_env("ale:Pong", 1, thread_affinity_offset=1).close()
    assert "thread_affinity_offset" not in seen[0] and seen[1]["thread_affinity_offset"] == 1
    assert envpool_kwargs(atari_protocol(thread_affinity_offset=0))["thread_affinity_offset"] == 0
    assert "thread_affinity_offset" not in envpool_kwargs(atari_protocol())
