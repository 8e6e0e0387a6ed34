"""Anakin's time to result: the stage clock (`podrl.run.stages`), the train call and evaluation compiled
in background threads while init runs (`AnakinCompiled.compile_ahead`), and the one evaluation call that
plays every seed's episodes."""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrl.envs
from podrl.agents.ppo import PPOConfig
from podrl.anakin import AnakinCompiled, train_anakin
from podrl.core.keys import eval_keys, per_seed_keys
from podrl.core.mesh import data_mesh
from podrl.run.evaluation import evaluate_greedy
from podrl.run.stages import timed_run
from tiny_runs import quick_anakin as quick_config

BACKGROUND = ("podrl-watchdog:compile", "podrl-watchdog:compile the evaluation")
"""The threads the ahead compiles run in (`podrl.run.watchdog.Begun`)."""


def stage_spans(stages: dict, prefix: str) -> list[dict]:
    return [s for s in stages["spans"] if s["kind"] == "stage" and s["name"].startswith(prefix)]


def test_stage_clock_times_stages_from_any_thread_and_jax_compiles():
    with timed_run() as clock:
        t0 = clock.now()
        with clock.stage("main"):
            time.sleep(0.2)
        with clock.stage("in a thread"):
            def timed():
                with clock.stage("worker"):
                    time.sleep(0.1)
            worker = threading.Thread(target=timed, name="worker-thread")
            worker.start()
            worker.join()
        unique = 1.2345  # a program no other test compiles: its trace and compile are recorded
        jax.jit(lambda x: jnp.sin(x) * unique)(np.ones(3, np.float32)).block_until_ready()
        report = clock.report()
    spans = {s["name"]: s for s in report["spans"]}
    assert spans["main"]["wall"] == pytest.approx(0.2, abs=0.15) and spans["main"]["start"] >= t0
    assert spans["worker"]["thread"] == "worker-thread" and spans["worker"]["wall"] >= 0.1
    assert spans["in a thread"]["start"] <= spans["worker"]["start"] < spans["in a thread"]["start"] + 0.5
    programs = [s for s in report["spans"] if s["name"] in ("<lambda>", "jit(<lambda>)")]
    assert {"trace", "lower"} <= {s["kind"] for s in programs}
    assert {"compile", "cache load"} & {s["kind"] for s in programs}
    assert report["total"]["wall"] >= report["before"]["wall"] + 0.3
    with timed_run() as closed:
        pass
    jax.jit(lambda x: x * 2.5)(np.ones(2, np.float32)).block_until_ready()  # after close: not recorded
    assert closed.report()["spans"] == []


@pytest.mark.timeout(300)
def test_run_stages_cover_its_wall_time_and_no_compile_runs_beside_a_train_call(cpu_devices):
    config = quick_config(num_devices=1, eval_every=4, total_steps=8 * 16 * 8)
    start = time.perf_counter()
    result = train_anakin(config, PPOConfig(), devices=cpu_devices[:1])
    wall = time.perf_counter() - start
    stages = result.stages
    names = [s["name"] for s in stages["spans"] if s["kind"] == "stage"]
    assert names[:3] == ["setup (env, agent, checks)", "init (the train call and evaluation compile beside it)",
                         "compile (waiting for the train call and evaluation)"], names
    calls, evaluations = stage_spans(stages, "train call"), stage_spans(stages, "evaluation")
    assert len(calls) == 2 and len(evaluations) == 2  # updates 0..3, 4..7; evaluated after 4 and after 8
    # the clock opened in train_anakin: its stages, in sequence, cover nearly all of the call's wall time
    main = [s for s in stages["spans"] if s["kind"] == "stage"]
    covered = sum(s["wall"] for s in main)
    assert covered <= wall + 0.05 and covered >= 0.8 * wall, (covered, wall)
    assert stages["total"]["wall"] - stages["before"]["wall"] == pytest.approx(wall, abs=0.5)
    # the background compiles (trace, lowering, compile of the train call and the evaluation) all end
    # before the first training call starts, and nothing compiles in those threads afterwards
    background = [s for s in stages["spans"] if s["kind"] != "stage" and s["thread"] in BACKGROUND]
    assert {s["kind"] for s in background} >= {"trace", "lower"}
    assert len({s["thread"] for s in background}) == 2
    assert max(s["start"] + s["wall"] for s in background) <= calls[0]["start"] + 1e-3
    # the evaluations used the program compiled ahead: no compile inside them
    for evaluation in evaluations:
        end = evaluation["start"] + evaluation["wall"]
        assert not [s for s in stages["spans"] if s["kind"] in ("compile", "cache load")
                    and evaluation["start"] <= s["start"] < end], evaluation


@pytest.mark.timeout(300)
def test_a_failed_background_compile_is_the_runs_error_once_both_compiles_ended(cpu_devices, monkeypatch):
    """The train call's trace fails while the evaluation is still compiling: the run raises that error,
    with a note naming where it came from, and only after the evaluation's compile thread has ended."""
    original_eval = AnakinCompiled._eval_shard

    def broken_call(self, state, first, limit):
        raise ValueError("the agent's loss does not trace")

    def slow_eval(self, params, seed):
        time.sleep(2.0)
        return original_eval(self, params, seed)

    monkeypatch.setattr(AnakinCompiled, "_call_shard", broken_call)
    monkeypatch.setattr(AnakinCompiled, "_eval_shard", slow_eval)
    with pytest.raises(ValueError, match="does not trace") as raised:
        train_anakin(quick_config(num_devices=1), PPOConfig(), devices=cpu_devices[:1])
    assert any("compile_ahead" in note for note in raised.value.__notes__)
    alive = [t.name for t in threading.enumerate() if t.name in BACKGROUND and t.is_alive()]
    assert alive == []


@pytest.mark.timeout(300)
def test_one_evaluation_call_gives_each_seeds_own_episodes(cpu_devices):
    """Every member's greedy episodes are played in one call (members batched, the loop stops when all of
    them have ended): the same returns as evaluating each member's params on its own keys separately."""
    config = quick_config(num_devices=1, num_seeds=3, eval_episodes=5, eval_max_steps=12)
    env = podrl.envs.make(config.env)
    spec = podrl.envs.env_spec(env)
    agent = PPOConfig().make_agent(spec, config.num_updates)
    program = AnakinCompiled(agent, env, config, data_mesh(cpu_devices[:1]), spec)
    state, _ = program.train_call(program.init(), 0)  # members' params now differ
    params = state.train_state.params
    returns, bad_reward, bad_observation, _ = program.evaluate_params(params, 7)
    keys = per_seed_keys(7, 3)
    expected = []
    for member in range(3):
        member_params = jax.tree.map(lambda x, m=member: x[m], params)  # [S, ...] -> one member
        result = evaluate_greedy(agent, env, member_params, eval_keys(keys[member], 0, 5), max_steps=12)
        expected.append(np.mean(np.asarray(result.returns)))
    np.testing.assert_array_equal(returns, np.asarray(expected, np.float32))
    np.testing.assert_array_equal(bad_reward, 0)
    np.testing.assert_array_equal(bad_observation, 0)
