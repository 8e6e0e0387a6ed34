"""scripts/check_imports.py: the import rules of CONTRIBUTING.md hold, and the check catches a break."""

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_imports.py"


def run_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_the_repository_obeys_its_import_rules():
    result = run_check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("import rules ok")


def plant(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:  # every folder a package
            (root / parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(text))


def test_planted_violations_are_each_reported_with_file_and_line(tmp_path):
    plant(tmp_path, {
        "podrl/anakin/train.py": "x = 1\n",
        "podrl/sebulba/learner.py": "from .. import types\n",  # a relative import a layout may do
        "podrl/types.py": "",
        "podrl/experiment.py": "def f():\n    from agents import AGENTS\n",  # a registry reader: allowed
        "agents/ppo/agent.py": "import jax\n\n\ndef f():\n    from podrl.anakin import train\n",  # lazy
        "agents/impala/agent.py": "from podrl import sebulba\n",
        "envs/registry.py": "from podrl.errors import ConfigError\n",
        "envs/adapters/atari.py": "import os\nif os:\n    import agents.ppo\n",
        "podrl/sebulba/actor.py": "import importlib\nm = importlib.import_module('agents.ppo.agent')\n",
        "podrl/anakin/program.py": "from agents.ppo import PPOConfig\n",
        "podrl/evaluation.py": "from agents import AGENTS\n",  # not a registry reader
        "podrl/policy.py": "from agents.dqn import DQNConfig\n",  # a reader, but a specific agent
    })
    result = run_check(str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    reported = {line.split(": ")[0] for line in result.stdout.splitlines() if ".py:" in line}
    assert reported == {
        "agents/ppo/agent.py:5", "agents/impala/agent.py:1", "envs/registry.py:1", "envs/adapters/atari.py:3",
        "podrl/sebulba/actor.py:2", "podrl/anakin/program.py:1", "podrl/evaluation.py:1", "podrl/policy.py:1",
    }, result.stdout
    assert "8 import rule violation(s)" in result.stdout
