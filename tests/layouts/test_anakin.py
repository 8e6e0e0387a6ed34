"""The Anakin layout: learning, determinism, compilation, seeds, evaluation, NaN handling."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrl.envs
from faulty_envs import NaNAfter
from podrl.agents.ppo import PPOConfig
from podrl.anakin import AnakinCompiled, NonFiniteError, train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.core.mesh import data_mesh
from podrl.core.types import Agent
from podrl.run.config import LoggingConfig
from podrl.run.evaluation import evaluate_greedy
from tiny_runs import quick_anakin as quick_config
from untrained import anakin_initial_return

QUIET = LoggingConfig(run_dir=None, console=False)


def params_of(result) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(result.state.train_state.params)]


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.timeout(300)
def test_ppo_solves_cartpole_on_a_4_device_mesh(cpu_devices):
    config = AnakinConfig(env="CartPole-v1", num_envs=4, rollout_length=128, total_steps=500_000,
                          num_devices=4, eval_every=64, eval_episodes=64, stop_at_return=475.0,
                          logging=QUIET)  # stops at the first evaluation >= 475
    result = train_anakin(config, PPOConfig())
    env_leaf = jax.tree.leaves(result.state.acting.env_state)[0]
    assert env_leaf.sharding.mesh.devices.size == 4 and env_leaf.shape[:2] == (1, 4)
    assert result.final_eval_return.shape == (1,)
    assert result.final_eval_return[0] >= 475.0, result.final_eval_return


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.timeout(300)
def test_ppo_improves_pendulum_well_beyond_random(cpu_devices):
    """A uniformly random policy scores about -1200 on Pendulum-v1 and a good one
    about -150..-200; -400 demands that the pendulum is swung up and mostly held."""
    config = AnakinConfig(env="Pendulum-v1", num_envs=16, rollout_length=64, total_steps=250_000,
                          num_devices=4, eval_every=32, eval_episodes=64, stop_at_return=-400.0,
                          logging=QUIET)  # stops at the first evaluation >= -400
    ppo = PPOConfig(reward_scale=0.1, gamma=0.95, num_epochs=10, learning_rate=1e-3,
                    entropy_coef=0.0, clip_value_loss=False)
    result = train_anakin(config, ppo)
    random_return = _random_policy_return("Pendulum-v1", episodes=64)
    assert random_return < -900.0, random_return
    assert result.final_eval_return[0] >= -400.0, (result.final_eval_return, random_return)


def _random_policy_return(env_name: str, episodes: int) -> float:
    env = podrl.envs.make(env_name)
    spec = env.action_spec()

    def act_random(params, actor_state, obs):
        key = jax.random.key(0)
        key = jax.random.fold_in(key, jnp.sum(jnp.abs(obs) * 1e4).astype(jnp.int32))
        action = jax.random.uniform(key, (obs.shape[0],) + spec.shape, minval=spec.minimum, maxval=spec.maximum)
        return action, actor_state

    agent = Agent(init=None, init_actor_state=lambda b, columns=None: (), act=None, act_greedy=act_random, update=None)
    result = jax.jit(lambda k: evaluate_greedy(agent, env, None, jax.random.split(k, episodes), 500))(
        jax.random.key(1))
    return float(result.returns.mean())


@pytest.mark.timeout(240)
def test_same_seed_gives_bit_identical_params(cpu_devices):
    config = quick_config(num_devices=2)
    a, b = train_anakin(config, PPOConfig()), train_anakin(config, PPOConfig())
    other = train_anakin(dataclasses.replace(config, seed=1), PPOConfig())
    for x, y in zip(params_of(a), params_of(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(params_of(a), params_of(other), strict=True))


@pytest.mark.timeout(240)
def test_train_call_is_traced_once_across_updates(cpu_devices):
    config = quick_config(num_devices=2, total_steps=8 * 16 * 12)
    env = podrl.envs.make(config.env)
    spec = podrl.envs.env_spec(env)
    agent = PPOConfig().make_agent(spec, config.num_updates)
    program = AnakinCompiled(agent, env, config, data_mesh(cpu_devices[:2]), spec)
    state = program.init()
    steps = []
    for first in range(0, config.num_updates, config.updates_per_call):
        state, metrics = program.train_call(state, first)  # the jit path, no AOT
        steps.append(int(np.asarray(state.train_state.update_step)[0]))
    assert program.trace_count == 1
    assert steps == [4, 8, 12]


def test_no_eval_episodes_means_no_evaluation_and_no_eval_program(cpu_devices, monkeypatch):
    """eval_episodes=0 (what the benchmarks pass: their final evaluation is untimed but its compile is
    not free): no greedy evaluation at the end or on the eval_every schedule; the eval program is never run."""
    def refuse(*args, **kwargs):
        raise AssertionError("evaluated although eval_episodes=0")

    monkeypatch.setattr(AnakinCompiled, "evaluate_params", refuse)
    config = quick_config(num_devices=1, total_steps=8 * 16 * 4, eval_every=2, eval_episodes=0)
    result = train_anakin(config, PPOConfig(), devices=cpu_devices[:1])
    assert result.final_eval_return is None
    assert [r["updates"] for r in result.history] == [4] and "eval_return" not in result.history[-1]


@pytest.mark.learning
@pytest.mark.timeout(240)
def test_ppo_learns_match_cue_from_a_bad_start(cpu_devices):
    """MatchCue: 4 one-hot cues, 4 actions; optimum 16, random 4. The untrained greedy
    policy names each cue with one fixed action, so it is measurably bad first."""
    config = quick_config(env="MatchCue-v0", num_devices=2, total_steps=8 * 16 * 40, updates_per_call=8,
                          eval_every=1, eval_episodes=16)
    agent_config = PPOConfig(learning_rate=3e-3)
    initial = float(anakin_initial_return(config, agent_config, cpu_devices[:2])[0])
    result = train_anakin(config, agent_config)
    evals = [float(record["eval_return"][0]) for record in result.history]
    assert len(evals) == 5 and initial <= 8.0, (initial, evals)
    assert evals[-1] >= 15.0 and evals[-1] - initial >= 7.0, (initial, evals)


def read_tensorboard_scalars(run_dir) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} of every scalar in `run_dir`'s event files, read by TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.mark.timeout(240)
def test_run_dir_holds_config_metrics_and_tensorboard_scalars_per_seed(cpu_devices, tmp_path):
    config = quick_config(num_devices=2, num_seeds=2, total_steps=8 * 16 * 8, eval_every=1,
                          logging=LoggingConfig(run_dir=str(tmp_path), run_name="tiny", console=False))
    result = train_anakin(config, PPOConfig())
    run_dir = tmp_path / "tiny"
    assert result.run_dir == str(run_dir)
    assert json.loads((run_dir / "config.json").read_text())["run"]["num_seeds"] == 2
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [8 * 16 * 4, 8 * 16 * 8]  # 8 updates, 4 per call
    assert [r["step"] for r in records] == steps
    scalars = read_tensorboard_scalars(run_dir)
    for name in ("episode_return", "eval_return", "train/policy_loss", "train/value_loss"):
        per_seed = [r[f"{name}_per_seed"] for r in records]
        assert all(len(values) == 2 for values in per_seed), name
        expected = {name: [r[name] for r in records],
                    **{f"{name}/seed{i}": [values[i] for values in per_seed] for i in range(2)}}
        for tag, values in expected.items():
            assert [step for step, _ in scalars[tag]] == steps, tag
            np.testing.assert_allclose([v for _, v in scalars[tag]], values, rtol=1e-6, err_msg=tag)
    assert [step for step, _ in scalars["sps"]] == steps and "sps/seed0" not in scalars
    np.testing.assert_allclose([v for _, v in scalars["sps"]], [r["sps"] for r in records], rtol=1e-6)
    # every scalar tag is a metrics.jsonl key or one seed of a *_per_seed key
    keys = {k for r in records for k in r} | {f"{k[:-9]}/seed{i}" for k in records[0] if k.endswith("_per_seed")
                                               for i in range(2)}
    assert set(scalars) <= keys, set(scalars) - keys


@pytest.mark.timeout(300)
def test_num_seeds_trains_independent_seeds_in_one_program(cpu_devices):
    multi = train_anakin(quick_config(num_devices=2, num_seeds=3, seed=5), PPOConfig())
    single = train_anakin(quick_config(num_devices=2, seed=6), PPOConfig())
    assert multi.final_eval_return.shape == (3,)
    assert multi.history[-1]["episode_return"].shape == (3,)
    leaves_multi, leaves_single = params_of(multi), params_of(single)
    assert all(x.shape[0] == 3 for x in leaves_multi)
    # Seed index 1 of a run from seed 5 is seed 6: vmap must not couple seeds.
    for x, y in zip(leaves_multi, leaves_single, strict=True):
        np.testing.assert_allclose(x[1], y[0], atol=1e-5)
    assert not np.allclose(leaves_multi[0][0], leaves_multi[0][1])


@pytest.mark.timeout(120)
def test_greedy_evaluation_scores_a_scripted_policy(cpu_devices):
    env = podrl.envs.make("MatchSign-v0")
    perfect = Agent(None, lambda b: (), None,
                    lambda p, s, obs: ((obs[:, 0] > 0).astype(jnp.int32), s), None)
    wrong = perfect._replace(act_greedy=lambda p, s, obs: ((obs[:, 0] < 0).astype(jnp.int32), s))
    keys = jax.random.split(jax.random.key(0), 5)
    best = evaluate_greedy(perfect, env, None, keys, max_steps=100)
    worst = evaluate_greedy(wrong, env, None, keys, max_steps=100)
    np.testing.assert_array_equal(best.returns, 16.0)
    np.testing.assert_array_equal(best.lengths, 16)
    assert bool(best.finished.all())
    np.testing.assert_array_equal(worst.returns, 0.0)
    capped = evaluate_greedy(perfect, env, None, keys, max_steps=10)
    np.testing.assert_array_equal(capped.returns, 10.0)
    assert not bool(capped.finished.any())


@pytest.mark.timeout(120)
def test_nan_loss_stops_the_run_naming_the_updates(cpu_devices):
    config = quick_config(num_devices=2, total_steps=8 * 16 * 12)
    with pytest.raises(NonFiniteError, match=r"train/\w+ became .*updates 0\.\.3"):
        train_anakin(config, PPOConfig(), env=NaNAfter(41))
