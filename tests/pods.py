"""Test helper: a local CPU pod started by `podrl launch` (real processes on 127.0.0.1), driven line by
line: wait for a line, signal one process, collect the output and each process's closing line.

Every wait has a deadline; `Pod` is a context manager that kills whatever is left (the launcher's
process group and every process it started) on the way out, also when a test fails.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PODRL = [sys.executable, "-m", "podrl"]
CLOSING = re.compile(r"^\[p(\d+)\] \[\w+(?: p\d+)?\] (stopped by (.+?)|done) at update (\d+):")
"""A process's closing line (`podrl.run.context.RunContext.finish`), as the launcher prefixes it."""


class Pod:
    """`podrl launch --num-processes N --devices-per-process K [launcher flags] -- podrl <command>`."""

    def __init__(self, processes: int, devices: int, command: list[str], launcher: tuple[str, ...] = (),
                 program: list[str] = PODRL):
        """`command` runs as `program + command` (default: a podrl subcommand)."""
        argv = PODRL + ["launch", "--num-processes", str(processes), "--devices-per-process", str(devices),
                        *launcher, "--"] + program + command
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                     start_new_session=True)
        self.lines: list[str] = []
        self.pids: dict[int, int] = {}

    def __enter__(self) -> "Pod":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for pid in self.pids.values():  # each process leads a session of its own
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def wait_for(self, pattern: str, timeout: float) -> str:
        """Reads output until a line matches `pattern`; returns that line (AssertionError at the deadline or EOF)."""
        deadline = time.monotonic() + timeout
        for line in iter(self.proc.stdout.readline, ""):
            self._keep(line)
            if re.search(pattern, line):
                return line
            assert time.monotonic() < deadline, f"no line matched {pattern!r} in {timeout}s:\n{self.text[-4000:]}"
        raise AssertionError(f"the pod ended before a line matched {pattern!r}:\n{self.text[-4000:]}")

    def kill(self, index: int, sig: int) -> float:
        """Sends `sig` to process `index`; returns the time it was sent (`time.monotonic`)."""
        os.kill(self.pids[index], sig)
        return time.monotonic()

    def finish(self, timeout: float) -> int:
        """Reads the rest of the output and waits for the launcher; returns its exit code."""
        rest, _ = self.proc.communicate(timeout=timeout)
        for line in rest.splitlines(keepends=True):
            self._keep(line)
        return self.proc.returncode

    def _keep(self, line: str) -> None:
        self.lines.append(line)
        match = re.match(r"\[launcher\] process (\d+): pid (\d+)", line)
        if match:
            self.pids[int(match.group(1))] = int(match.group(2))

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def closing(self) -> dict[int, tuple[str, int]]:
        """{process: (why, update)} of the closing lines: why is "done" or what stopped it ("SIGTERM to process 1")."""
        out = {}
        for line in self.lines:
            match = CLOSING.match(line)
            if match:
                out[int(match.group(1))] = (match.group(3) or "done", int(match.group(4)))
        return out


def run_pod(processes: int, devices: int, command: list[str], timeout: float, launcher: tuple[str, ...] = ()) -> Pod:
    """Runs a pod to its end; returns it (its `returncode`, `lines`, `closing()`)."""
    with Pod(processes, devices, command, launcher) as pod:
        pod.returncode = pod.finish(timeout)
    return pod


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (an unreaped zombie has stopped running). The state
    is the field after the command name, which is in parentheses and may hold spaces."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def records(run_dir: Path) -> list[dict]:
    """The records of a run's `metrics.jsonl`."""
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
