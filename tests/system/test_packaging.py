"""One installable package: the `podrl` command, a user's own `envs/` and `agents/` beside podrl, the wheel.

* A user's folder with its own `envs` and `agents` packages: `podrl anakin --env envs.chain:Chain` and
  `podrl sebulba --env envs.chain:GymChain` train from it, and `import envs, agents` there gives the
  user's packages after podrl is imported (podrl's own are `podrl.envs` and `podrl.agents`). The user's
  packages are traps: their `make` / `AGENTS` would break podrl if it ever imported them.
* The wheel: built from a copy of the checkout, it holds `podrl/` (agents/ and envs/ as podrl.agents
  and podrl.envs, every module of the three folders) and its dist-info, nothing else; installed into a
  fresh venv that sees the current environment's dependencies but not the editable podrl, its `podrl`
  command trains from an empty folder outside the checkout.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"podrl": "podrl", "agents": "podrl/agents", "envs": "podrl/envs"}
"""Folder of the checkout -> where its modules go in the wheel (pyproject.toml's package-dir)."""

SUBCOMMANDS = ("anakin", "sebulba", "evaluate", "launch", "reproduce", "plot", "aggregate", "population-summary",
               "profile-summary")
TINY_ANAKIN = ["--total-steps", "2048", "--num-envs", "4", "--rollout-length", "16", "--cpu-devices", "1",
               "--eval-episodes", "2"]
"""A training run of a few seconds (plus its compile)."""

USER_ENVS = '''
"""A user's own envs package (a trap: podrl importing it instead of podrl.envs would call this make)."""


def make(name, **kwargs):
    raise RuntimeError("the user's envs.make was called instead of podrl.envs.make")
'''

USER_CHAIN = '''
"""Two-state chains: a JAX env for Anakin and a gymnasium env for Sebulba."""
from typing import NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from dm_env import specs

from podrl import envs


class ChainState(NamedTuple):
    position: jax.Array  # int32 []: 0 or 1


class Chain:
    """Action 1 moves from state 0 to 1, and in state 1 ends the episode with reward 1; action 0 goes back to 0."""

    def reset(self, key):
        state = ChainState(jnp.int32(0))
        return state, envs.restart(self._obs(state))

    def step(self, state, action):
        done = (state.position == 1) & (action == 1)
        state = ChainState(jnp.where(action == 1, jnp.int32(1), jnp.int32(0)))
        return state, envs.transition(self._obs(state), jnp.where(done, 1.0, 0.0), terminated=done)

    def _obs(self, state):
        return jax.nn.one_hot(state.position, 2, dtype=jnp.float32)

    def observation_spec(self):
        return specs.Array((2,), jnp.float32, name="observation")

    def action_spec(self):
        return specs.DiscreteArray(2, name="action")


class GymChain(gym.Env):
    """The same chain on the host, cut after 10 steps."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.t = 0, 0
        return np.eye(2, dtype=np.float32)[self.position], {}

    def step(self, action):
        done = self.position == 1 and int(action) == 1
        self.position, self.t = int(action), self.t + 1
        return np.eye(2, dtype=np.float32)[self.position], float(done), done, self.t >= 10, {}
'''

USER_AGENTS = '''
"""A user's own agents package (a trap: podrl reading this registry would find no agent it knows)."""

AGENTS = {"mine": "a user's agent podrl's registry does not have"}
'''

IMPORTS = """
import podrl, podrl.agents, podrl.envs
import agents, envs, envs.chain
print(envs.__file__, agents.__file__, envs.chain.__file__, sorted(agents.AGENTS), sep="\\n")
print(podrl.envs.__file__, podrl.agents.__file__, "ppo" in podrl.agents.AGENTS, sep="\\n")
"""


def console_command() -> str:
    """The `podrl` command this interpreter's install made (pyproject.toml's [project.scripts])."""
    found = shutil.which("podrl", path=os.path.dirname(sys.executable))
    assert found, f"no podrl command beside {sys.executable}: install the checkout (pip install -e .)"
    return found


def user_folder(root: Path) -> Path:
    """A folder of a user's own: envs/ (with chain.py) and agents/ packages, nothing of podrl."""
    for name, text in {"envs/__init__.py": USER_ENVS, "envs/chain.py": USER_CHAIN,
                       "agents/__init__.py": USER_AGENTS}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip())
    return root


def outside_env() -> dict[str, str]:
    """The environment a user's shell would give: no PYTHONPATH pointing into the checkout."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run(command: list[str], cwd: Path, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=outside_env())
    return done, time.perf_counter() - start


@pytest.mark.timeout(900)
def test_a_users_own_envs_and_agents_packages_work_beside_podrl(tmp_path):
    folder = user_folder(tmp_path / "project")
    podrl = console_command()
    done, _ = run([sys.executable, "-c", IMPORTS], folder, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.split("\n")
    assert lines[:4] == [str(folder / "envs" / "__init__.py"), str(folder / "agents" / "__init__.py"),
                         str(folder / "envs" / "chain.py"), "['mine']"], done.stdout
    assert Path(lines[4]).parent.name == "envs" and Path(lines[4]).parent != folder / "envs"  # podrl's own
    assert Path(lines[5]).parent.name == "agents" and lines[6] == "True", done.stdout

    anakin, seconds = run([podrl, "anakin", "--env", "envs.chain:Chain", *TINY_ANAKIN], folder, timeout=400)
    assert anakin.returncode == 0, anakin.stdout[-3000:] + anakin.stderr[-3000:]
    assert "[anakin] envs.chain:Chain:" in anakin.stdout and "greedy return" in anakin.stdout, anakin.stdout
    print(f"podrl anakin in the user's folder: {seconds:.1f} s")
    sebulba, seconds = run([podrl, "sebulba", "--env", "envs.chain:GymChain", "--total-steps", "1024",
                            "--envs-per-thread", "4", "--rollout-length", "16", "--cpu-devices", "2",
                            "--eval-episodes", "2"], folder, timeout=400)
    assert sebulba.returncode == 0, sebulba.stdout[-3000:] + sebulba.stderr[-3000:]
    assert "[sebulba] envs.chain:GymChain" in sebulba.stdout and "greedy return" in sebulba.stdout, sebulba.stdout
    print(f"podrl sebulba in the user's folder: {seconds:.1f} s")
    assert len(list((folder / "runs").iterdir())) == 2  # both runs wrote their folders there


def build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the checkout's package sources (pip's isolated build: setuptools>=77
    from the package index); skips only when that index cannot be reached."""
    source = tmp_path / "podrl-checkout"  # a path, not a bare name pip would look up on the index
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in SOURCES:
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path / "dist"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=600)
    said = done.stdout + done.stderr
    if done.returncode != 0 and "setuptools>=77" in said and ("No matching distribution" in said
                                                              or "Could not find a version" in said):
        pytest.skip("building the wheel needs setuptools>=77 from the package index, which is unreachable")
    assert done.returncode == 0, said[-4000:]
    (wheel,) = out.glob("podrl-*.whl")
    return wheel


def fresh_venv(path: Path) -> Path:
    """A venv without pip whose dependencies come from this environment's site-packages, listed in a
    .pth file (a folder a .pth names is not scanned for .pth files: the editable podrl's finder stays
    out). Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    (target,) = (path / "lib").glob("python3*/site-packages")
    (target / "outer_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


@pytest.mark.timeout(900)
def test_the_wheel_installs_a_podrl_command_that_trains_outside_the_checkout(tmp_path):
    start = time.perf_counter()
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"podrl", "podrl-0.1.0.dist-info"}, sorted(names)[:20]
    expected = {f"{SOURCES[folder]}/{path.relative_to(ROOT / folder).as_posix()}"
                for folder in SOURCES for path in (ROOT / folder).rglob("*.py") if "__pycache__" not in path.parts}
    assert expected - set(names) == set()  # every module of agents/, envs/ and podrl/ (pyproject's packages)
    entry_points = zipfile.ZipFile(wheel).read("podrl-0.1.0.dist-info/entry_points.txt").decode()
    assert "podrl = podrl.cli.main:main" in entry_points
    print(f"wheel built in {time.perf_counter() - start:.1f} s")

    python = fresh_venv(tmp_path / "venv")
    empty = tmp_path / "empty"
    empty.mkdir()
    missing, _ = run([str(python), "-c", "import jax, flax, tyro; import podrl"], empty, timeout=120)
    assert missing.returncode == 1 and "No module named 'podrl'" in missing.stderr, missing.stderr[-2000:]
    # --ignore-installed: the editable podrl's metadata is visible through the .pth; never touch it
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--ignore-installed", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    podrl = tmp_path / "venv" / "bin" / "podrl"
    helped, _ = run([str(podrl), "--help"], empty, timeout=120)
    assert helped.returncode == 0 and all(f"\n  {name} " in helped.stdout for name in SUBCOMMANDS), helped.stdout
    where, _ = run([str(python), "-c", "import podrl.envs; print(podrl.envs.__file__)"], empty, timeout=120)
    assert where.stdout.strip().startswith(str(tmp_path / "venv")), where.stdout + where.stderr
    trained, seconds = run([str(podrl), "anakin", *TINY_ANAKIN], empty, timeout=400)
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    assert "[anakin] CartPole-v1:" in trained.stdout and "greedy return" in trained.stdout, trained.stdout
    assert list((empty / "runs").iterdir())  # the run folder is the empty folder's
    print(f"the wheel's podrl anakin: {seconds:.1f} s; whole test {time.perf_counter() - start:.1f} s")
