"""What a user meets at the training CLIs (issue 28, items 1-5; issue 25, the experiment resolved once).

Each test runs the scripts as a user would (a subprocess in a folder of the user's own),
except where a unit of `podrl.cli.experiment` / `podrl.cli.flags` says it more directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MY_ENV = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np


    class Chain(gym.Env):
        """Reward 1 for action 1; `length` steps per episode; `made.txt` records each construction."""

        observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, length):
            self.length, self.t = length, 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(3, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.zeros(3, np.float32), float(action), False, self.t >= self.length, {}


    def make_chain(length=2):
        with open("made.txt", "a") as f:
            f.write(f"{length}\\n")
        return Chain(length)
''')

SEBULBA_TINY = ["--cpu-devices", "2", "--envs-per-thread", "2", "--rollout-length", "8", "--total-steps", "32",
                "--eval-episodes", "2", "--logging.no-tensorboard"]
ANAKIN_TINY = ["--cpu-devices", "1", "--num-envs", "4", "--rollout-length", "8", "--total-steps", "64",
               "--updates-per-call", "2", "--eval-episodes", "2", "--eval-max-steps", "20", "--logging.no-tensorboard"]


def script(cwd: Path, name: str, *args: str, timeout: int = 280) -> subprocess.CompletedProcess:
    """`python scripts/<name> args` run from `cwd`, podrl importable (as installed), nothing else on the path."""
    environ = {k: v for k, v in os.environ.items() if k != "PODRL_DEBUG"}
    environ["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=environ)


def error_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and lines and "Traceback" not in done.stderr, done.stderr[-3000:]
    return lines[0]


@pytest.mark.timeout(600)
def test_own_env_module_in_the_current_folder_trains_and_evaluates_with_its_kwargs(tmp_path):
    (tmp_path / "myenv.py").write_text(MY_ENV)
    driver = tmp_path / "elsewhere" / "driver.py"  # a user's program in another folder: cwd is not on its path
    driver.parent.mkdir()
    driver.write_text("from podrl.envs.adapters.make import make_host_env\n"
                      "env = make_host_env('myenv:make_chain', 2, length=5)\nprint(env.num_envs)\n")
    done = subprocess.run([sys.executable, str(driver)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert set((tmp_path / "made.txt").read_text().split()) == {"5"}  # the kwargs reach the user's constructor
    (tmp_path / "made.txt").unlink()

    done = script(tmp_path, "train_sebulba.py", *SEBULBA_TINY, "--env", "myenv:make_chain", "--env-kwargs",
                  "length=3", "--logging.run-dir", "runs", "--logging.run-name", "r")
    assert done.returncode == 0, done.stderr[-3000:]
    assert set((tmp_path / "made.txt").read_text().split()) == {"3"}
    done = script(tmp_path, "evaluate.py", "runs/r", "--episodes", "2", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["env"] == "myenv:make_chain" and max(summary["returns"]) <= 3.0  # episodes of length 3


@pytest.mark.timeout(300)
def test_a_failed_sebulba_start_leaves_no_run_folder_and_speaks_like_anakin(tmp_path):
    runs = tmp_path / "runs"
    sebulba = error_line(script(tmp_path, "train_sebulba.py", *SEBULBA_TINY, "--env", "NoSuchEnv-v0",
                                "--logging.run-dir", str(runs)))
    assert sebulba.startswith("error: invalid config: env: unknown env 'NoSuchEnv-v0'"), sebulba
    assert not runs.exists() or not any(runs.iterdir()), list(runs.rglob("*"))
    anakin = error_line(script(tmp_path, "train_anakin.py", "--env", "NoSuchEnv-v0", "--logging.run-dir", str(runs)))
    assert anakin.startswith("error: invalid config: env: unknown env 'NoSuchEnv-v0'"), anakin


@pytest.mark.timeout(600)
def test_one_seed_prints_a_scalar_and_a_fresh_run_into_its_folder_points_to_resume(tmp_path):
    flags = [*ANAKIN_TINY, "--logging.run-dir", str(tmp_path), "--logging.run-name", "r"]
    done = script(tmp_path, "train_anakin.py", *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    closing = done.stdout.strip().splitlines()[-1]
    assert "greedy return " in closing and "greedy return [" not in closing, closing
    float(closing.split("greedy return ")[1].split(";")[0])  # one number
    again = error_line(script(tmp_path, "train_anakin.py", *flags))
    assert "logging.run_name" in again and f"--resume {tmp_path / 'r'}" in again, again


def test_run_flags_may_come_after_the_agent_subcommand(tmp_path):
    # a bad value placed after agent:impala is read as the run's flag (it used to be "Unrecognized or misplaced")
    line = error_line(script(tmp_path, "train_anakin.py", "agent:impala", "--agent.learning-rate", "1e-3",
                             "--num-envs", "0", timeout=120))
    assert line.startswith("error: invalid config: num_envs: must be a positive integer"), line


def test_argv_order_puts_run_flags_before_the_agent():
    from podrl.cli.flags import order_argv

    argv = ["agent:impala", "--agent.gamma", "0.9", "--num-envs", "8", "--sweep", "a=1", "b=2", "--agent.torso", "mlp"]
    assert order_argv(argv, "ppo") == ["--num-envs", "8", "--sweep", "a=1", "b=2", "agent:impala",
                                       "--agent.gamma", "0.9", "--agent.torso", "mlp"]
    assert order_argv(["agent:dqn", "--help"], "ppo") == ["agent:dqn", "--help"]


def test_help_groups_the_flags_and_speaks_of_its_layout(tmp_path):
    sebulba = " ".join(script(tmp_path, "train_sebulba.py", "--help", timeout=120).stdout.split())
    anakin = " ".join(script(tmp_path, "train_anakin.py", "--help", timeout=120).stdout.split())
    for box in ("run options", "env options", "evaluation options", "logging options", "checkpoint options",
                "hosts options"):
        assert box in sebulba and box in anakin, box
    assert "population options" in anakin and "population options" not in sebulba
    def choices(text):  # the --preset choices, however the help box wraps them
        return text.split("--preset {", 1)[1].split("}", 1)[0].replace("│", "").replace(" ", "").split(",")

    assert choices(sebulba) == ["None", "atari-ppo", "atari-impala", "atari-r2d2", "mujoco-sac", "mujoco-td3"]
    assert choices(anakin) == ["None", "cartpole-ppo", "minatar-ppo", "minatar-impala", "minatar-pqn", "minatar-muzero",
                               "minatar-muzero-stoix", "minatar-r2d2", "minatar-dqn", "memory-ppo-lstm", "jumanji-ppo",
                               "jumanji-pqn", "xminigrid-ppo", "brax-ppo"]
    assert "(default: )" not in anakin and "(default: )" not in sebulba
    console = sebulba.split("--logging.console, --logging.no-console")[1][:80]
    assert "--log-every" in console and "compiled call" not in console, console
    env = sebulba.split("--env STR")[1][:300]
    assert "Anakin" not in env and "gymnasium id" in env, env
    assert "Sebulba" not in anakin.split("--env STR")[1][:300]


def test_an_experiment_parses_its_strings_once():
    from podrl.anakin.config import AnakinConfig
    from podrl.cli.experiment import default_experiment
    from podrl.envs.schemes import SCHEMES, split
    from podrl.sebulba.config import SebulbaConfig

    run = SebulbaConfig(env="ale:Pong", env_kwargs=("protocol=dqn", "full_action_space=True"), lag="1")
    assert run.env_options is run.env_options and run.env_options == {"protocol": "dqn", "full_action_space": True}
    experiment = default_experiment("sebulba")
    assert experiment.env_options == {} and split(experiment.run.env) == (None, "CartPole-v1")  # schemes' table
    assert split("dm_env:my_pkg.envs:make") == (SCHEMES["dm_env"], "my_pkg.envs:make")
    assert split("my_envs:Chain") == (None, "my_envs:Chain") and split("ale:Pong")[0] is SCHEMES["ale"]
    anakin = AnakinConfig(population=2, sweep=("agent.entropy_coef=0.0,0.01",))
    assert anakin.sweep_axes is anakin.sweep_axes and anakin.sweep_axes[0].values == (0.0, 0.01)
