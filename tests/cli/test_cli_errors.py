"""User errors in the training CLIs are one-paragraph messages with exit status 2, not tracebacks.

Each case runs `scripts/train_sebulba.py` (or `train_anakin.py`) as a subprocess on
an env or flag the user got wrong: the run must exit 2, print `error: <label>: ...`
naming the problem, and show no traceback unless `--debug` (or PODRL_DEBUG=1) asks
for one. The bad envs live in a module written into the subprocess's working
directory (the CLI resolves `module:Class` from there).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from cli_runs import ROOT, assert_user_error, run

BAD_ENVS = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np
    from dm_env import specs

    from podrl.envs.adapters import EpisodeTracker


    class WrongStepShape(gym.Env):
        """Declares (3,) observations; reset keeps to it, step returns (4,)."""

        observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(3, np.float32), {}

        def step(self, action):
            return np.zeros(4, np.float32), 0.0, False, False, {}


    class MultiDiscreteObservation(WrongStepShape):
        observation_space = gym.spaces.MultiDiscrete([3, 2])  # (Dict and Tuple spaces are supported)


    class Float64Host:
        """A HostVectorEnv whose observations are float64 though its spec says float32."""

        def __init__(self, num_envs):
            self.num_envs = num_envs
            self.tracker = EpisodeTracker(num_envs)

        def observation_spec(self):
            return specs.Array((2,), np.float32, name="observation")

        def action_spec(self):
            return specs.DiscreteArray(2, name="action")

        def reset(self, seed):
            return self.tracker.first(np.zeros((self.num_envs, 2), np.float64))

        def step(self, actions):
            obs = np.zeros((self.num_envs, 2), np.float64)
            done = np.zeros(self.num_envs, bool)
            return self.tracker.transition(obs, obs, np.zeros(self.num_envs), done, done)

        def close(self):
            pass


    def float64_host(num_envs):
        return Float64Host(num_envs)
''')


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A working directory holding `bad_envs.py` and a fake `ale_py` package that fails to import."""
    path = tmp_path_factory.mktemp("cli_errors")
    (path / "bad_envs.py").write_text(BAD_ENVS)
    (path / "no_ale" / "ale_py").mkdir(parents=True)
    (path / "no_ale" / "ale_py" / "__init__.py").write_text('raise ImportError("simulated: ale-py missing")\n')
    return path

TINY = ["--cpu-devices", "2", "--envs-per-thread", "4", "--rollout-length", "8", "--total-steps", "64",
        "--logging.run-dir", "None", "--eval-episodes", "0"]


CASES = {
    "wrong observation shape": (
        ["--env", "bad_envs:WrongStepShape"],
        ["error: env does not match its spec: ", "WrongStepShape.step(): observation shape: expected (3,)",
         "got (4,)", "observation_space"]),
    "wrong observation dtype": (
        ["--env", "bad_envs:float64_host"],
        ["error: env does not match its spec: ", "Float64Host.reset(): observation dtype: expected float32",
         "got float64"]),
    "unsupported space": (
        ["--env", "bad_envs:MultiDiscreteObservation"],
        ["error: unsupported space: ", "MultiDiscrete(", "FlattenObservation"]),
    "unresolvable import path": (
        ["--env", "no_such_pkg.envs:Maze"],
        # one format in both layouts (issue 28 item 2): an unknown env is the config error of field env
        ["error: invalid config: env: ", "cannot import module 'no_such_pkg.envs'", "'module:factory'"]),
    "missing extra": (
        ["--env", "ale:Pong"],
        ["error: missing optional dependency: ", "pip install 'podrl[atari]'", "simulated: ale-py missing"]),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", list(CASES))
def test_sebulba_user_error_is_one_paragraph_with_exit_2(workdir, case):
    flags, fragments = CASES[case]
    env = {"PYTHONPATH": f"{workdir / 'no_ale'}{os.pathsep}{ROOT}"} if case == "missing extra" else None
    assert_user_error(run(workdir, "train_sebulba.py", *TINY, *flags, env=env), *fragments)


@pytest.mark.timeout(300)
def test_debug_flag_and_env_variable_show_the_traceback(workdir):
    flags = [*TINY, "--env", "bad_envs:WrongStepShape"]
    for done in (run(workdir, "train_sebulba.py", *flags, "--debug"),
                 run(workdir, "train_sebulba.py", *flags, env={"PODRL_DEBUG": "1"})):
        assert done.returncode == 2, done.stderr[-3000:]
        assert "Traceback (most recent call last)" in done.stderr
        assert "check_host_env" in done.stderr  # where it was found
        assert "ValueError: Output array is the wrong shape" in done.stderr  # the chained original error
        assert done.stderr.rstrip().splitlines()[-1].startswith("error: env does not match its spec: ")


@pytest.mark.timeout(300)
def test_anakin_config_and_env_errors_exit_2_without_traceback(workdir):
    assert_user_error(run(workdir, "train_anakin.py", "--num-envs", "0"),
                      "error: invalid config: num_envs: must be a positive integer, got 0")
    assert_user_error(run(workdir, "train_anakin.py", "--env", "no_such_pkg.envs:Maze"),
                      "error: invalid config: env: ", "cannot import module 'no_such_pkg.envs'")
    # continuous actions
    assert_user_error(run(workdir, "train_anakin.py", "--env", "Pendulum-v1", "--num-devices", "1", "agent:pqn"),
                      "error: invalid config: env: agent 'pqn' ", "needs a discrete action space", "BoundedArray(")
    assert_user_error(run(workdir, "train_anakin.py", "--num-devices", "1", "agent:sac"),  # CartPole: discrete actions
                      "error: invalid config: env: agent 'sac' ", "needs a continuous (Box) action space",
                      "DiscreteArray(")
    assert_user_error(run(workdir, "train_anakin.py", "--num-devices", "1", "agent:dqn", "--agent.buffer-size",
                          "1000000000000"),  # a replay buffer no device holds: refused before compiling
                      "error: invalid config: buffer_size: ", "44,000,000,000,008 bytes", "GiB per learner device")
    assert "--debug" in run(workdir, "train_anakin.py", "--help").stdout
