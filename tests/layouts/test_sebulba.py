"""The Sebulba layout: parity with Anakin, learning, staleness, failures, clean shutdown."""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from continuous_tasks import REACH, REACH_SEBULBA_STEPS, REACH_TD3, REACH_THRESHOLDS
from continuous_tasks import SMALL as CONTINUOUS_SMALL
from parity import QUIET, anakin_sebulba_params, max_diffs, sebulba_threads, tiny
from podrl.agents.impala import ImpalaConfig
from podrl.agents.ppo import PPOConfig
from podrl.agents.sac import SACConfig
from podrl.agents.td3 import TD3Config
from podrl.core.errors import ConfigError, NonFiniteError
from podrl.core.parallel import mean_across_learners
from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.envs.registry import make
from podrl.sebulba import SebulbaConfig, train_sebulba
from podrl.sebulba.learner import LearnerStep
from podrl.sebulba.params import ParamsSource
from podrl.sebulba.rollout import JOIN_GRACE_S


@pytest.mark.timeout(300)
@pytest.mark.parametrize("agent_config, env, bound", [
    (PPOConfig(), "CartPole-v1", 1e-6), (SACConfig(**CONTINUOUS_SMALL), "ReachCue-v0", 1e-6),
    (TD3Config(**CONTINUOUS_SMALL), "ReachCue-v0", 1e-6)], ids=["ppo", "sac", "td3"])
def test_parity_with_anakin_same_seed(cpu_devices, agent_config, env, bound):
    """lag=0, one actor thread, the JAX env through the host adapter, one learner device:
    the same agent code gives the same parameters as Anakin on one device.

    Not bit-identical: Anakin fuses acting into one scanned XLA program while Sebulba
    runs `act` as its own jitted call, so the stored values differ in the last float
    bits; the actions of CartPole (discrete) and its episodes are identical, ReachCue's
    continuous actions (and so its rewards) may differ in their last bits. Bound: 1e-6
    (measured: SAC 1.9e-9, TD3 1.5e-8, their replay buffers learning from the first update
    on, 8 gradient steps per update; their weights moved by 1.4e-2 and 6e-3).
    """
    anakin, sebulba, init = anakin_sebulba_params(agent_config, env=env)
    assert max(max_diffs(anakin, sebulba)) < bound, max_diffs(anakin, sebulba)
    # ...while the updates moved the weights by far more than that (scalar leaves are schedule values
    # such as SAC's and TD3's warm-up flag, which changes without learning).
    learned = [d for d, leaf in zip(max_diffs(anakin, init), init, strict=True) if leaf.ndim > 0]
    assert max(learned) > 1e-3


def fingerprint(params) -> jax.Array:
    """float32 []: the sum of the first element of every params leaf (moves with every update)."""
    return sum(jnp.ravel(leaf)[0] for leaf in jax.tree.leaves(params))


@dataclasses.dataclass(frozen=True)
class RevealingPPO:
    """PPO whose actions reveal the params they were sampled with: `act` adds the params'
    `fingerprint` to its extras and `update` logs it (`acted_fingerprint`, averaged over
    the batch) beside the fingerprint of the learner's params before the update
    (`learner_fingerprint`), then updates as PPO does without it."""

    inner: PPOConfig = PPOConfig(num_minibatches=2)
    """The agent that acts and learns."""

    def check_batch(self, rollout_length: int, envs_per_shard: int) -> None:
        self.inner.check_batch(rollout_length, envs_per_shard)

    def make_agent(self, env_spec, total_updates: int):
        agent = self.inner.make_agent(env_spec, total_updates)

        def act(params, actor_state, observation, key):
            action, extras, actor_state = agent.act(params, actor_state, observation, key)
            return action, {**extras, "fingerprint": jnp.full(action.shape[:1], fingerprint(params))}, actor_state

        def update(train_state, trajectory, key):
            extras = dict(trajectory.agent_extras)
            acted = mean_across_learners(jnp.mean(extras.pop("fingerprint")))
            new_state, metrics = agent.update(train_state, trajectory._replace(agent_extras=extras), key)
            return new_state, {**metrics, "acted_fingerprint": acted,
                               "learner_fingerprint": fingerprint(train_state.params)}

        return agent._replace(act=act, update=update)


def check_acted_with_reported_versions(result) -> None:
    """Each update's batch was sampled with the params of the versions `policy_lags` reports:
    its mean fingerprint is the mean, over the actor threads, of the learner's fingerprint
    at version `update - lag` (logged once per update, `log_every=1`)."""
    acted = np.array([r["train/acted_fingerprint"] for r in result.history], np.float64)
    learner = np.array([r["train/learner_fingerprint"] for r in result.history], np.float64)
    assert len(acted) == len(result.policy_lags) > 2
    assert np.abs(np.diff(learner)).min() > 1e-5, learner  # the premise: every version is told apart
    versions = np.arange(len(acted))[:, None] - result.policy_lags
    np.testing.assert_allclose(acted, learner[versions].mean(axis=1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("groups", [1, 2], ids=["one_env_group", "two_env_groups"])
@pytest.mark.parametrize("lag, expect", [("0", "zero"), ("1", "one"), ("async", "bounded")])
@pytest.mark.timeout(240)
def test_policy_lag_follows_the_staleness_setting(cpu_devices, lag, expect, groups):
    """The reported lags follow the setting, and the actors acted with exactly those versions (also with
    two env groups per thread alternating, `env_groups=2`)."""
    config = tiny(lag=lag, threads_per_actor_device=2, queue_size=2, log_every=1, env_groups=groups)
    result = train_sebulba(config, RevealingPPO())
    lags = result.policy_lags
    assert lags.shape == (config.num_updates, 2)
    if expect == "zero":
        assert (lags == 0).all()
    elif expect == "one":
        assert (lags[0] == 0).all() and (lags[1:] == 1).all(), lags
    else:
        assert lags.min() >= 0 and lags.max() <= config.queue_size + 1, lags
    check_acted_with_reported_versions(result)
    assert result.env_steps == config.num_updates * config.steps_per_update
    assert not sebulba_threads()


class FailingEnv(JaxHostVectorEnv):
    """A JAX host env that raises (or hangs, returns NaN rewards, or sleeps 50 ms per step) from step `k`."""

    def __init__(self, mode: str, k: int, num_envs: int, release: threading.Event | None = None):
        super().__init__(make("MatchSign-v0"), num_envs)
        self.mode, self.k, self.count, self.release = mode, k, 0, release
        self.hung_at: float | None = None  # time.monotonic() when a "hang" began

    def step(self, actions):
        self.count += 1
        if self.count >= self.k:
            if self.mode == "raise":
                raise RuntimeError(f"env exploded at step {self.count}")
            if self.mode == "hang":
                self.hung_at = time.monotonic()
                self.release.wait(120)
            if self.mode == "slow":
                time.sleep(0.05)
            if self.mode == "nan":
                ts = super().step(actions)
                return ts._replace(reward=np.full_like(ts.reward, np.nan))
        return super().step(actions)


@pytest.mark.timeout(120)
def test_env_exception_stops_the_run_with_that_exception(cpu_devices):
    start = time.monotonic()
    factory = lambda j, n: FailingEnv("raise", 30 if j == 1 else 10**9, n)  # noqa: E731
    with pytest.raises(RuntimeError, match="env exploded at step 30") as info:
        train_sebulba(tiny(threads_per_actor_device=2, total_steps=2 * 4 * 8 * 50), PPOConfig(num_minibatches=2),
                      env_factory=factory)
    assert time.monotonic() - start < 10 + 15  # run + compile; the failure itself stops at once
    assert any("sebulba-actor-1" in note for note in info.value.__notes__)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].name == "step" and "test_sebulba" in frames[-1].filename  # the env's own frame
    assert not sebulba_threads()


@pytest.mark.timeout(120)
def test_env_hang_is_reported_by_the_timeout(cpu_devices):
    """Thread 0's env hangs at its 12th step, thread 1's never: the TimeoutError arrives
    within the learner's wait (timeout_s) plus the short join grace of the shut-down
    (JOIN_GRACE_S) plus a margin; the healthy thread is gone before the hang is released.

    Thread 1's env is slow (50 ms a step) so that its own wait for params version 2
    starts well after the learner's wait for thread 0's rollout 1 and times out later."""
    timeout_s, release = 2.0, threading.Event()
    made: list[FailingEnv] = []

    def factory(j, n):
        made.append(FailingEnv("hang", 12, n, release) if j == 0 else FailingEnv("slow", 1, n))
        return made[-1]

    try:
        with pytest.raises(TimeoutError, match=r"rollout \d+ from actor thread 0.*'env.step'"):
            train_sebulba(tiny(timeout_s=timeout_s, threads_per_actor_device=2, total_steps=2 * 4 * 8 * 50),
                          PPOConfig(num_minibatches=2), env_factory=factory)
        reported = time.monotonic()
        assert made[0].hung_at is not None and made[1].hung_at is None
        assert reported - made[0].hung_at <= timeout_s + JOIN_GRACE_S + 1.0, reported - made[0].hung_at
        stuck = sebulba_threads()  # before the release: only the hung thread, a daemon
        assert [t.name for t in stuck] == ["sebulba-actor-0"] and stuck[0].daemon, stuck
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while sebulba_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sebulba_threads()


@pytest.mark.timeout(240)
def test_async_actors_run_ahead_of_a_slow_learner(cpu_devices, monkeypatch):
    """lag=async: while a slow learner (0.3 s more per update) works, the actors keep acting with the params
    they have until their queue is full, so rollouts are older than the learner (a synchronous implementation
    shows 0 everywhere): a rollout made just after the learner took one waits behind queue_size others, a
    lag of exactly queue_size + 1 (3 here, never more)."""
    checked = LearnerStep.checked

    def slow_step(self, *args):
        time.sleep(0.3)
        return checked(self, *args)

    monkeypatch.setattr(LearnerStep, "checked", slow_step)
    config = tiny(lag="async", threads_per_actor_device=2, queue_size=2, total_steps=2 * 4 * 8 * 12)
    result = train_sebulba(config, PPOConfig(num_minibatches=2))
    lags = result.policy_lags
    assert lags.shape == (12, 2)
    assert lags.min() >= 0 and lags.max() == config.queue_size + 1, lags
    assert not sebulba_threads()


def device_ids(tree) -> set[int]:
    """The ids of every device holding a leaf of `tree`."""
    return {d.id for leaf in jax.tree.leaves(tree) for d in leaf.devices()}


@pytest.mark.timeout(120)
def test_actors_act_with_params_on_their_own_devices(cpu_devices, monkeypatch):
    """actor_devices=(3, 4), one thread each: every rollout of thread j reads params that live on device
    3 + j (the learner's are on 1 and 2)."""
    seen: list[tuple[int, set]] = []
    for_rollout = ParamsSource.for_rollout

    def recording(self, rollout, device_slot):
        params, version = for_rollout(self, rollout, device_slot)
        seen.append((device_slot, device_ids(params)))
        return params, version

    monkeypatch.setattr(ParamsSource, "for_rollout", recording)
    train_sebulba(tiny(actor_devices=(3, 4), eval_episodes=0), PPOConfig(num_minibatches=2))
    assert seen and {slot for slot, _ in seen} == {0, 1}
    assert all(devices == {cpu_devices[3 + slot].id} for slot, devices in seen), seen


@pytest.mark.timeout(120)
def test_the_learner_state_lives_on_the_learner_devices(cpu_devices):
    result = train_sebulba(tiny(learner_devices=(5, 6), eval_episodes=0), PPOConfig(num_minibatches=2))
    assert device_ids(result.train_state.params) == {cpu_devices[5].id, cpu_devices[6].id}


@pytest.mark.timeout(120)
def test_actor_threads_pin_themselves_to_the_actor_cpus(cpu_devices, monkeypatch):
    """actor_cpus (c0, c1) and 2 actor threads: thread j pins itself (pid 0: the thread) to core j mod 2."""
    cores = tuple(sorted(os.sched_getaffinity(0)))[:2]
    cores = cores * (2 // len(cores))  # one core only: both threads on it
    pins, real = [], os.sched_setaffinity

    def recording(pid, cpus):
        pins.append((threading.current_thread().name, pid, set(cpus)))
        real(pid, cpus)

    monkeypatch.setattr(os, "sched_setaffinity", recording)
    train_sebulba(tiny(threads_per_actor_device=2, actor_cpus=cores, eval_episodes=0), PPOConfig(num_minibatches=2))
    assert sorted((pid, tuple(cpus)) for _, pid, cpus in pins) == sorted([(0, (cores[0],)), (0, (cores[1],))])
    assert all(name != threading.main_thread().name for name, _, _ in pins), pins


@pytest.mark.timeout(120)
def test_evaluation_episodes_end_at_eval_max_steps(cpu_devices):
    """No CartPole episode can end within 3 steps: with eval_max_steps=3 every greedy episode is cut there
    (a return of exactly 3), where the default cap would let it run on."""
    result = train_sebulba(tiny(env="CartPole-v1", eval_episodes=4, eval_max_steps=3), PPOConfig(num_minibatches=2))
    assert result.final_eval_return == 3.0, result.history[-1]


@pytest.mark.timeout(120)
def test_nan_loss_stops_the_run(cpu_devices):
    factory = lambda j, n: FailingEnv("nan", 20, n)  # noqa: E731
    with pytest.raises(NonFiniteError, match=r"train/\w+ became"):
        train_sebulba(tiny(total_steps=4 * 8 * 50), PPOConfig(num_minibatches=2), env_factory=factory)
    assert not sebulba_threads()


CACHE_LOOKUPS = "/jax/compilation_cache/compile_requests_use_cache"  # jax.monitoring events
CACHE_HITS = "/jax/compilation_cache/cache_hits"


@pytest.mark.timeout(300)
def test_nine_short_runs_end_cleanly(cpu_devices):
    """Three short runs per staleness setting, back to back: each ends with its steps counted and
    no thread left behind. Each run has its own seed, which its programs take as data (the init, the
    learner keys, the rollouts' keys): once each setting has run, a new seed compiles nothing (no
    program missing from the suite's persistent compilation cache)."""
    before = threading.active_count()
    events = collections.Counter()

    def count(event: str, **_) -> None:
        events[event] += 1

    jax.monitoring.register_event_listener(count)
    try:
        for i in range(9):
            config = tiny(env="CartPole-v1", seed=i, total_steps=4 * 8 * 2, lag=("0", "1", "async")[i % 3],
                          eval_episodes=0)
            events.clear()
            result = train_sebulba(config, PPOConfig(num_minibatches=2))
            assert result.env_steps == 4 * 8 * 2
            assert not sebulba_threads()
            if i >= 3:
                compiled = events[CACHE_LOOKUPS] - events[CACHE_HITS]
                assert events[CACHE_LOOKUPS] > 0 and compiled == 0, (i, dict(events))
    finally:
        jax.monitoring.unregister_event_listener(count)
    assert threading.active_count() <= before


@pytest.mark.timeout(120)
def test_metrics_report_stages_lag_and_queues(cpu_devices):
    result = train_sebulba(tiny(lag="1", eval_every=2, eval_episodes=4), PPOConfig(num_minibatches=2))
    record = result.history[-1]
    for key in ("sps", "episode_return", "policy_lag_mean", "policy_lag_max", "queue_depth", "time/env_step_s",
                "time/inference_s", "time/learner_step_s", "time/learner_queue_wait_s",
                "time/actor_queue_put_wait_s", "time/actor_params_wait_s", "train/policy_loss", "eval_return"):
        assert key in record, key
    assert record["policy_lag_max"] == 1 and record["sps"] > 0
    assert len(result.history) == 3


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(lag="fast"), "lag"),
        (dict(lag="-1"), "lag"),
        (dict(vectorization="fork"), "vectorization"),
        (dict(envs_per_thread=0), "envs_per_thread"),
        (dict(actor_devices=()), "actor_devices"),
        (dict(actor_devices=(0, 0)), "actor_devices"),
        (dict(timeout_s=0.0), "timeout_s"),
        (dict(queue_size=0), "queue_size"),
    ],
)
def test_invalid_sebulba_fields_are_named(overrides, field):
    with pytest.raises(ConfigError) as info:
        SebulbaConfig(**overrides)
    assert info.value.field == field


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(actor_devices=(0,), learner_devices=(0, 1)), "learner_devices"),
        (dict(actor_devices=(9,)), "actor_devices"),
        (dict(envs_per_thread=3, learner_devices=(1, 2)), "envs_per_thread"),
        (dict(envs_per_thread=4, rollout_length=3, learner_devices=(1, 2)), "num_minibatches"),
    ],
)
def test_device_split_errors_before_anything_starts(cpu_devices, overrides, field):
    with pytest.raises(ConfigError) as info:
        train_sebulba(SebulbaConfig(env="jax:MatchSign-v0", logging=QUIET, **overrides), PPOConfig())
    assert info.value.field == field
    assert not sebulba_threads()


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("agent_config, env, envs_per_thread, rollout_length, total_steps, threshold", [
    (PPOConfig(), "CartPole-v1", 16, 32, 400_000, 475.0), (ImpalaConfig(), "CartPole-v1", 16, 16, 400_000, 475.0),
    (SACConfig(**REACH), "jax:ReachCue-v0", 8, 8, REACH_SEBULBA_STEPS, REACH_THRESHOLDS["sac"]),
    (TD3Config(**REACH_TD3), "jax:ReachCue-v0", 8, 8, REACH_SEBULBA_STEPS, REACH_THRESHOLDS["td3"]),
], ids=["ppo", "impala", "sac", "td3"])
def test_agents_solve_gymnasium_cartpole_under_sebulba(cpu_devices, agent_config, env, envs_per_thread,
                                                       rollout_length, total_steps, threshold):
    """1 actor device, 2 learner devices, lag 1: the discrete agents on gymnasium's own CartPole-v1
    on the host, the continuous ones (SAC, TD3) on ReachCue-v0 through the JAX host adapter (see
    tests/test_continuous.py: an untrained greedy policy returns ~5.3 there). The threshold within
    `total_steps`, evaluated every 50 updates, the run stopping at the first evaluation that reaches it
    (2026-12-06, seed 0: PPO 500.0 at 51k steps, IMPALA 500.0 at 77k)."""
    config = SebulbaConfig(env=env, total_steps=total_steps, envs_per_thread=envs_per_thread,
                           rollout_length=rollout_length, lag="1", actor_devices=(0,), learner_devices=(1, 2),
                           log_every=50, eval_every=50, eval_episodes=32, stop_at_return=threshold, logging=QUIET)
    result = train_sebulba(config, agent_config)
    assert result.final_eval_return >= threshold, result.history[-1]
    assert (result.policy_lags[1:] == 1).all()
    assert not sebulba_threads()
