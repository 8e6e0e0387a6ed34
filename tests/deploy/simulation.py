"""The simulated cloud and cluster the deploy scripts run against (tests/deploy/fakes): a
`Simulation` with the fakes first on PATH, `podrl` and `python3` commands that are this checkout's
and this interpreter, the fakes' state folder, and a way to run a script as a process group that is
always cleaned up. (No conftest.py here: a second module named conftest would shadow
tests/conftest.py for the tests that import it.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
FAKES = Path(__file__).resolve().parent / "fakes"
TOTAL_UPDATES = 60
PER_UPDATE = 8 * 16  # env steps of one Anakin update below (per seed)
TRAIN = ["anakin", "--env", "MatchCue-v0", "--num-envs", "8", "--rollout-length", "16", "--updates-per-call", "1",
         "--eval-every", "0", "--eval-episodes", "8", "--total-steps", str(TOTAL_UPDATES * PER_UPDATE),
         "--cpu-devices", "1", "--share-compiles", "--logging.run-name", "r", "--logging.no-tensorboard",
         "agent:ppo", "--agent.learning-rate", "3e-3"]
"""A 2-process pod of a few seconds per 10 updates (tests/system/test_preemption.py's programs)."""
STEP_LINE = r"^\[anakin\] step "


class Simulation:
    """The fakes' world: `env` for the scripts, `state` (FAKE_STATE), what was called."""

    def __init__(self, tmp_path: Path):
        self.root, self.state, bin_dir = tmp_path, tmp_path / "state", tmp_path / "bin"
        self.state.mkdir()
        bin_dir.mkdir()
        podrl = bin_dir / "podrl"  # this checkout's podrl, as `podrl` on this machine's PATH
        podrl.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m podrl "$@"\n')
        podrl.chmod(0o755)
        (bin_dir / "python3").symlink_to(sys.executable)  # the fakes' interpreter
        self.env = {**os.environ, "PATH": f"{FAKES}:{bin_dir}:/usr/bin:/bin", "FAKE_STATE": str(self.state),
                    "FAKE_PYTHON": sys.executable}
        for name in ("PODRL", "PODRL_REPO", "PODRL_REF", "SHARE", "CKPT", "TPU_NAME", "ZONE"):
            self.env.pop(name, None)
        assert shutil.which("gcloud", path=self.env["PATH"]) == str(FAKES / "gcloud")  # never the real one

    def calls(self, tool: str) -> list[list[str]]:
        """The argv of every call of the fake `tool`, in order."""
        path = self.state / "calls.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [c["argv"] for c in map(json.loads, lines) if c["tool"] == tool]

    def worker_calls(self) -> list[tuple[str, str, str]]:
        """(worker, tool, arguments) of every faked tool a worker ran."""
        path = self.state / "worker-calls.log"
        return [tuple(line.split("\t")) for line in path.read_text().splitlines()] if path.exists() else []

    def start(self, argv: list[str], **env: str) -> "Script":
        return Script(argv, {**self.env, **env})


class Script:
    """A script run in a session of its own, read line by line; everything it started is killed on exit."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(argv, env=env, cwd=env.get("FAKE_STATE"), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []

    def __enter__(self) -> "Script":
        return self

    def __exit__(self, *exc) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def wait_for(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        for line in iter(self.proc.stdout.readline, ""):
            self.lines.append(line)
            if re.search(pattern, line):
                return line
            assert time.monotonic() < deadline, f"no line matched {pattern!r} in {timeout}s:\n{self.text[-4000:]}"
        raise AssertionError(f"the script ended before a line matched {pattern!r}:\n{self.text[-4000:]}")

    def finish(self, timeout: float) -> int:
        rest, _ = self.proc.communicate(timeout=timeout)
        self.lines += rest.splitlines(keepends=True)
        return self.proc.returncode

    @property
    def text(self) -> str:
        return "".join(self.lines)


def sigterm(pid_file: Path) -> None:
    """SIGTERM to the process whose pid `pid_file` holds, as a preemption notice to that host."""
    os.kill(int(pid_file.read_text()), signal.SIGTERM)


def stopped_at(text: str) -> int:
    """The update of the agreed stop that a SIGTERM to process 1 caused (both processes name the same)."""
    updates = {int(u) for u in re.findall(r"stopped by SIGTERM to process 1 at update (\d+):", text)}
    assert len(updates) == 1, text[-4000:]
    return updates.pop()
