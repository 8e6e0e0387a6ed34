"""`podrl evaluate` (podrl/cli/evaluate.py): a checkpoint's greedy policy scores what it scores in-process.

One tiny Anakin PPO run (CartPole-v1, 2 seeds, 3 updates: a half-trained policy
whose episode returns differ from episode to episode and from seed to seed, so a
wrong seed index or wrong params shows) writes a checkpoint; the command runs on
it as a subprocess and must print the returns that the same params give when
evaluated here with the same keys / host env seed.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium
import jax
import numpy as np
import pytest

import podrl.envs
from podrl.agents.ppo import PPOConfig
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.envs.adapters.jax_host import JaxHostVectorEnv
from podrl.run.config import LoggingConfig
from podrl.run.evaluation import evaluate_greedy, evaluate_host_greedy
from untrained import sebulba_initial_params

ROOT = Path(__file__).resolve().parents[2]
AGENT = PPOConfig(num_minibatches=2)


def tiny_anakin_run(run_dir: str | None) -> AnakinConfig:
    """The run test_fault_matrix.py trains too (keep them identical: one compile per test session)."""
    return AnakinConfig(env="CartPole-v1", num_seeds=2, num_envs=8, rollout_length=16, total_steps=8 * 16 * 3,
                        num_devices=2, updates_per_call=2, eval_every=0, eval_episodes=2,
                        logging=LoggingConfig(run_dir=run_dir, run_name="r", console=False, tensorboard=False))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    result = train_anakin(tiny_anakin_run(str(tmp_path_factory.mktemp("runs"))), AGENT)
    assert result.checkpoint_dir == os.path.join(result.run_dir, "checkpoints")
    return result


def run_evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "podrl", "evaluate", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def seed_params(result, index: int):
    return jax.tree.map(lambda x: np.asarray(x)[index], result.state.train_state.params)


def cartpole_agent():
    return AGENT.make_agent(podrl.envs.env_spec(podrl.envs.make("CartPole-v1")), 1)


def test_default_env_matches_in_process_evaluation(trained, tmp_path):
    """Run folder in, JSON out; seed index 1; --video degrades (no pygame here) or writes a file."""
    video_dir = tmp_path / "video"
    done = run_evaluate(trained.run_dir, "--seed-index", "1", "--episodes", "16", "--seed", "3", "--json",
                      "--video", str(video_dir))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["step"], summary["layout"], summary["backend"]) == (3, "anakin", "jax")

    env = podrl.envs.make("CartPole-v1")
    keys = jax.random.split(jax.random.key(3), 16)
    expected = [np.asarray(evaluate_greedy(cartpole_agent(), env, seed_params(trained, i), keys, 1000).returns)
                for i in (0, 1)]
    assert not np.array_equal(expected[0], expected[1])  # premise: the seeds' policies differ
    np.testing.assert_allclose(summary["returns"], expected[1])
    assert summary["mean"] == pytest.approx(float(expected[1].mean()))
    assert summary["std"] == pytest.approx(float(expected[1].std()))

    message = re.search(r"video: .*", done.stderr)
    assert message, done.stderr
    if "wrote" in message.group(0):  # pygame (CartPole's renderer) installed
        assert any(video_dir.iterdir())
    else:
        assert "skipped" in message.group(0) and "CartPole-v1" in message.group(0)


def test_host_env_matches_in_process_host_evaluation(trained):
    """--env jax:CartPole-v1: the JAX env on the host through make_host_env; text output."""
    done = run_evaluate(os.path.join(trained.run_dir, "checkpoints"), "--env", "jax:CartPole-v1", "--episodes", "8")
    assert done.returncode == 0, done.stderr
    match = re.search(r"jax:CartPole-v1 \(host\), checkpoint step 3: greedy return ([\d.]+) ± ([\d.]+) over 8 episodes",
                      done.stdout)
    assert match, done.stdout

    host = JaxHostVectorEnv(podrl.envs.make("CartPole-v1"), 8)
    returns = evaluate_host_greedy(cartpole_agent(), seed_params(trained, 0), host, seed=0, max_steps=1000).returns
    assert float(match.group(1)) == pytest.approx(float(np.mean(returns)), abs=0.006)
    assert float(match.group(2)) == pytest.approx(float(np.std(returns)), abs=0.006)


def test_missing_checkpoint_exits_2_naming_the_path(tmp_path):
    missing = tmp_path / "no_such_run"
    done = run_evaluate(str(missing))
    assert done.returncode == 2
    assert f"no checkpoint folder at '{missing}'" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_evaluate(str(empty))
    assert done.returncode == 2
    assert f"no complete checkpoint in '{empty}'" in done.stderr


def test_corrupted_checkpoint_exits_2_naming_the_path(trained, tmp_path):
    copy = tmp_path / "checkpoints"
    shutil.copytree(trained.checkpoint_dir, copy)
    data = glob.glob(str(copy / "3" / "params" / "ocdbt.process_0" / "d" / "*"))
    assert data
    for path in data:  # truncate every params data file to half its size
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    done = run_evaluate(str(copy), "--json")
    assert done.returncode == 2, done.stdout
    assert f"cannot restore the params of step 3 in '{copy}'" in done.stderr
    assert done.stdout == ""


def test_debug_adds_the_traceback_to_the_one_line_error(tmp_path, capsys):
    """`podrl evaluate` takes --debug as the training commands do (anywhere among its flags)."""
    from podrl.cli import evaluate

    missing = str(tmp_path / "no_such_run")
    assert evaluate.main([missing, "--episodes", "2"]) == 2
    plain = capsys.readouterr().err
    assert plain.startswith(f"error: no checkpoint folder at '{missing}'") and "Traceback" not in plain
    assert "add --debug" in plain
    assert evaluate.main(["--debug", missing, "--episodes", "2"]) == 2
    debug = capsys.readouterr().err
    assert "Traceback (most recent call last)" in debug and f"error: no checkpoint folder at '{missing}'" in debug


class SquareEnv(gymnasium.Env):
    """A 4-step gymnasium env with CartPole's spaces that renders 8x8 RGB frames."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode=None):
        self.render_mode, self.t = render_mode, 0
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        assert action in (0, 1)
        self.t += 1
        return np.full(4, 0.1 * self.t, np.float32), 1.0, self.t >= 4, False, {}

    def render(self):
        return np.full((8, 8, 3), 40 * self.t, np.uint8)


@pytest.fixture
def evaluate_module():
    """`podrl evaluate` in-process (for the cases that need no fresh interpreter)."""
    from podrl.cli import evaluate

    return evaluate


def test_sebulba_checkpoint_and_step_selection(evaluate_module, trained, tmp_path, capsys):
    """A Sebulba checkpoint (params without a seed axis) evaluates on its host env; --step picks a step.

    JAX CartPole on the host: its greedy returns differ from episode to episode and
    change with the env seed and with the params, so a wrong seed or wrong params shows."""
    from podrl.envs.adapters.make import make_host_env
    from podrl.sebulba import SebulbaConfig, train_sebulba

    config = SebulbaConfig(env="jax:CartPole-v1", envs_per_thread=4, rollout_length=8, total_steps=4 * 8 * 2,
                           actor_devices=(0,), learner_devices=(1, 2), eval_episodes=0, logging=LoggingConfig(
                               run_dir=str(tmp_path), run_name="s", console=False, tensorboard=False))
    result = train_sebulba(config, AGENT)
    assert evaluate_module.main([result.run_dir, "--episodes", "8", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["layout"], summary["backend"], summary["step"]) == ("sebulba", "host", 2)
    agent, host = cartpole_agent(), make_host_env("jax:CartPole-v1", 8)
    params = jax.device_get(result.train_state.params)
    expected = evaluate_host_greedy(agent, params, host, seed=0, max_steps=10_000).returns
    np.testing.assert_allclose(summary["returns"], expected)
    other_seed = evaluate_host_greedy(agent, params, host, seed=1, max_steps=10_000).returns
    _, other_params = sebulba_initial_params(AGENT, podrl.envs.env_spec(podrl.envs.make("CartPole-v1")), seed=1)
    other_policy = evaluate_host_greedy(agent, other_params, host, seed=0, max_steps=10_000).returns
    assert len(set(expected.tolist())) > 1, expected
    assert not np.array_equal(other_seed, expected) and not np.array_equal(other_policy, expected)

    assert evaluate_module.main([trained.run_dir, "--step", "99"]) == 2
    assert f"no checkpoint step 99 in '{trained.checkpoint_dir}' (steps: [3])" in capsys.readouterr().err
    assert evaluate_module.main([trained.run_dir, "--seed-index", "2"]) == 2
    assert "--seed-index 2 is out of range: the run trained 2 seed(s)" in capsys.readouterr().err


def test_video_falls_back_to_frames_when_moviepy_is_missing(trained, tmp_path, monkeypatch):
    import importlib.util

    from podrl.cli import policy, video

    real_find_spec = importlib.util.find_spec
    without_moviepy = lambda name, *a: None if name == "moviepy" else real_find_spec(name, *a)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", without_moviepy)
    message = video.record_video(cartpole_agent(), seed_params(trained, 0), lambda: SquareEnv("rgb_array"),
                                 str(tmp_path), seed=0, max_steps=100)
    written = list(tmp_path.iterdir())
    assert len(written) >= 1, message
    assert "moviepy is not installed" in message and str(tmp_path) in message
    if written[0].suffix == ".gif":
        from PIL import Image

        assert Image.open(written[0]).n_frames == 5  # the reset frame + one per step
    else:
        assert len(written) == 5
    with pytest.raises(policy.PolicyError, match="not 'rgb_array'"):
        video.record_video(cartpole_agent(), seed_params(trained, 0), lambda: SquareEnv(None), str(tmp_path), 0, 10)


# ---------------------------------------------------------------- IMPALA checkpoints, spec mismatch


def test_impala_checkpoint_matches_in_process_evaluation(tmp_path):
    """An IMPALA (V-trace) run's checkpoint: `podrl evaluate` rebuilds the IMPALA agent from the saved
    config and scores exactly what its params score here (not what fresh params would)."""
    from podrl.agents.impala import ImpalaConfig

    agent_config = ImpalaConfig(learning_rate=3e-3)
    run = dataclasses.replace(tiny_anakin_run(str(tmp_path)), num_seeds=1)
    result = train_anakin(run, agent_config)
    done = run_evaluate(result.run_dir, "--episodes", "16", "--seed", "5", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["layout"], summary["backend"], summary["step"]) == ("anakin", "jax", 3)

    env = podrl.envs.make("CartPole-v1")
    agent = agent_config.make_agent(podrl.envs.env_spec(env), 1)
    keys = jax.random.split(jax.random.key(5), 16)
    trained_returns = np.asarray(evaluate_greedy(agent, env, seed_params(result, 0), keys, 1000).returns)
    fresh = agent.init(jax.random.key(1), podrl.envs.env_spec(env)).params
    fresh_returns = np.asarray(evaluate_greedy(agent, env, fresh, keys, 1000).returns)
    assert not np.array_equal(trained_returns, fresh_returns)  # premise: other params would show
    np.testing.assert_allclose(summary["returns"], trained_returns)


def test_env_with_other_spaces_is_refused_naming_both_specs(trained):
    """--env Acrobot-v1 on a CartPole checkpoint: exit 2 naming both envs' shapes, before any episode."""
    done = run_evaluate(trained.run_dir, "--env", "Acrobot-v1")
    assert done.returncode == 2, done.stdout + done.stderr
    message = next(line for line in done.stderr.splitlines() if line.startswith("error: "))
    for fragment in ("'Acrobot-v1'", "observation shape (6,)", "3 discrete actions", "observation shape (4,)",
                     "2 discrete actions", "trained"):
        assert fragment in message, message
    assert "Traceback" not in done.stderr and done.stdout == ""
