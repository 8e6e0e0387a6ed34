"""tools/check_imports.py: the import rules of CONTRIBUTING.md hold, and the check catches a break."""

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "check_imports.py"


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
        "podrl/sebulba/learner.py": "from ..core import types\n",  # a relative import a layout may do
        "podrl/core/types.py": "",
        "podrl/cli/experiment.py": "def f():\n    from podrl.agents import AGENTS\n",  # a registry reader: allowed
        "agents/ppo/agent.py": "import jax\n\n\ndef f():\n    from podrl.anakin import train\n",  # lazy
        "agents/impala/agent.py": "from podrl import sebulba\n",
        "agents/dqn/agent.py": "from podrl.core import types\nfrom podrl.envs import types\n",  # allowed
        "envs/registry.py": "from podrl.core.errors import ConfigError\n",
        "envs/adapters/atari.py": "import os\nif os:\n    import podrl.agents.ppo\n",
        "podrl/sebulba/rollout.py": "import importlib\nm = importlib.import_module('podrl.agents.ppo.agent')\n",
        "podrl/anakin/compiled.py": "from podrl.agents.ppo import PPOConfig\n",
        "podrl/anakin/rollout.py": "from podrl.sebulba import transport\n",  # the other layout
        "podrl/run/evaluation.py": "from podrl.cli import presets\n",  # a run service reaching up
        "podrl/core/keys.py": "from podrl.run import driver\n",  # the core reaching up
        "podrl/cli/video.py": "from podrl.agents import AGENTS\n",  # not a registry reader
        "podrl/cli/policy.py": "from podrl.agents.dqn import DQNConfig\n",  # a reader, but a specific agent
        "podrl/reports/reproduce.py": "from podrl.cli import presets\nfrom podrl.anakin import train\n",  # allowed
        "podrl/reports/plot.py": "def f():\n    from podrl.agents.ppo import PPOConfig\n",  # a specific agent
        "podrl/reports/report.py": "from podrl.agents import AGENTS\n",  # not a registry reader
        "podrl/run/logging.py": "from podrl.reports import plot\n",  # a run service reaching the reports
        "podrl/testing/shards.py": "from podrl.run import checkpoint\nfrom podrl.anakin import rollout\n",  # a layout
        "podrl/sebulba/setup.py": "from podrl.testing import shards\n",  # a layout runs the check: allowed
    })
    result = run_check(str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    reported = {line.split(": ")[0] for line in result.stdout.splitlines() if ".py:" in line}
    assert reported == {
        "agents/ppo/agent.py:5", "agents/impala/agent.py:1", "envs/registry.py:1", "envs/adapters/atari.py:3",
        "podrl/sebulba/rollout.py:2", "podrl/anakin/compiled.py:1", "podrl/anakin/rollout.py:1",
        "podrl/run/evaluation.py:1", "podrl/core/keys.py:1", "podrl/cli/video.py:1", "podrl/cli/policy.py:1",
        "podrl/reports/plot.py:2", "podrl/reports/report.py:1", "podrl/run/logging.py:1", "podrl/testing/shards.py:2",
    }, result.stdout
    assert "15 import rule violation(s)" in result.stdout


def test_a_circle_is_refused_naming_its_modules_even_through_a_lazy_import(tmp_path):
    plant(tmp_path, {
        "podrl/cli/experiment.py": "def resolve():\n    from podrl.cli.flags import parse\n",  # lazy: still counts
        "podrl/cli/flags.py": "from podrl.cli.experiment import Experiment\n",
        "podrl/run/control.py": "from podrl.run import preemption\n",
        "podrl/run/preemption.py": "from podrl.run.logging import log\n",
        "podrl/run/logging.py": "import podrl.run.control\n",  # a way round three modules
        # no circle: a package face importing its own modules, which import each other by `from package import`
        "podrl/core/__init__.py": "from podrl.core.types import Agent\n",
        "podrl/core/types.py": "from podrl.core import errors\n",
        "podrl/core/errors.py": "",
    })
    result = run_check(str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    circles = sorted(line.split(" (")[0] for line in result.stdout.splitlines() if line.startswith("circle: "))
    assert circles == [
        "circle: podrl.cli.experiment -> podrl.cli.flags -> podrl.cli.experiment",
        "circle: podrl.run.control -> podrl.run.preemption -> podrl.run.logging -> podrl.run.control",
    ], result.stdout
    assert "0 import rule violation(s), 2 circle(s)" in result.stdout


def test_breaking_the_circle_passes(tmp_path):
    plant(tmp_path, {
        "podrl/cli/experiment.py": "x = 1\n",
        "podrl/cli/flags.py": "from podrl.cli.experiment import x\n\n\ndef resolve():\n    return x\n",
    })
    result = run_check(str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
