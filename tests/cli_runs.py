"""Running the training scripts as a user does, in a folder with a broken env module, and reading their errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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


def run(workdir: Path, script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "PODRL_DEBUG"}
    environ.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], capture_output=True, text=True,
                          timeout=240, cwd=workdir, env=environ)


def assert_user_error(done: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit 2, one `error: ...` paragraph holding every fragment, no traceback; returns the message."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    assert lines and lines[0].startswith("error: "), done.stderr[-3000:]
    assert len(lines) == 2 and "--debug" in lines[1], lines  # the message, then the --debug hint
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
