"""The "Plug in your own environment" examples (docs/environments.md) run as written, through the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from podrl.agents.ppo import PPOConfig
from untrained import sebulba_initial_return

ROOT = Path(__file__).resolve().parents[2]
from tools.check_readme import doc_paths  # noqa: E402  (README.md and docs/*.md: the pages whose commands run)


def pages_text() -> str:
    return "\n".join(page.read_text() for page in doc_paths())


def readme_block(header: str) -> str:
    """The python code block of README.md or docs/*.md whose first line is `# <header>`."""
    text = pages_text()
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        if block.startswith(f"# {header}"):
            return block
    raise AssertionError(f"README.md and docs/*.md have no python block starting with '# {header}'")


def readme_command(env_arg: str) -> list[str]:
    text = pages_text()
    line = next(x for x in text.splitlines() if x.startswith("podrl ") and env_arg in x)
    return line.split()


@pytest.mark.learning
@pytest.mark.timeout(300)
@pytest.mark.parametrize("module, env_arg, threshold, untrained_at_most", [
    ("my_envs", "my_envs:GuessCue", 8.0, 5.0),           # optimum 10, random 3.3
    ("my_dm_envs", "dm_env:my_dm_envs:Corridor", 0.9, 0.0),  # optimum 1 (reached in 5 steps), else 0
])
def test_readme_user_env_trains_with_one_command(tmp_path, monkeypatch, module, env_arg, threshold,
                                                 untrained_at_most):
    code = readme_block(f"{module}.py")
    assert len(code.strip().splitlines()) <= 30
    (tmp_path / f"{module}.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    # the policy the run starts from (PPO, seed 0) is measurably bad on the README's env
    initial = sebulba_initial_return(PPOConfig(), env_arg, seed=0, episodes=16, max_steps=100)
    assert initial <= untrained_at_most, initial
    command = readme_command(env_arg)
    command = [sys.executable, "-m", "podrl", *command[1:], "--cpu-devices", "2",
               "--logging.run-dir", str(tmp_path / "runs"), "--logging.run-name", "r", "--eval-episodes", "8"]
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=280,
                            env={**os.environ, "PYTHONPATH": pythonpath})
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(x) for x in (tmp_path / "runs" / "r" / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["eval_return"] >= threshold, (initial, records[-1])  # the run trains seed 0
