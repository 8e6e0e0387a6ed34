"""`podrl launch` (podrl/cli/launch.py) forwards SIGINT/SIGTERM to every process it started and leaves none behind.

The launched command is a stand-in for a training script (no JAX, so the test takes
seconds): each process notes how it found SIGINT at start (default or ignored), starts a
grandchild in its own process group that ignores both signals (as a worker process
might), prints its pid, the grandchild's and that note, and on the signal writes the
signal's name to a file and exits 0 without waiting for the grandchild. After the
launcher has received the signal, every process must have got it, the launcher must
exit 0, and no child or grandchild may still be running.

The launcher also runs started with SIGINT ignored, as a background job of a
non-interactive shell is (CI's runners, `cmd &` in a script): its processes must still
start with SIGINT at its default, or a forwarded Ctrl-C would not reach what they start.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pods import alive

ROOT = Path(__file__).resolve().parents[2]
NUM_PROCESSES = 3

CHILD = r"""
import os, signal, subprocess, sys, time
out, index = sys.argv[1], sys.argv[sys.argv.index("--process-id") + 1]
sigint_at_start = "ignored" if signal.getsignal(signal.SIGINT) == signal.SIG_IGN else "default"
stubborn = ("import signal, time; [signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)]; "
            "print('ignoring', flush=True); time.sleep(300)")
grandchild = subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE, text=True)
assert grandchild.stdout.readline() == "ignoring\n"  # ready only once the grandchild ignores both

def on_signal(signum, frame):
    with open(os.path.join(out, f"p{index}"), "w") as f:
        f.write(signal.Signals(signum).name)
    os._exit(0)

signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGTERM, on_signal)
print(f"ready pid={os.getpid()} grandchild={grandchild.pid} sigint_at_start={sigint_at_start}", flush=True)
time.sleep(300)
"""

# Starts the rest of the command line with SIGINT ignored (an exec keeps an ignored signal ignored).
WITH_SIGINT_IGNORED = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                       "os.execv(sys.executable, [sys.executable] + sys.argv[1:])"]


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still running after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(map(alive, pids)):
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("launcher_sigint", ["default", "ignored"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_launcher_forwards_the_signal_to_every_process_and_leaves_no_orphan(tmp_path, sig, launcher_sigint):
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    start = WITH_SIGINT_IGNORED if launcher_sigint == "ignored" else [sys.executable]
    launcher = subprocess.Popen(
        start + ["-m", "podrl", "launch", "--num-processes", str(NUM_PROCESSES), "--",
                 sys.executable, str(child), str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    pids: list[int] = []
    output = []
    try:
        for line in iter(launcher.stdout.readline, ""):
            output.append(line)
            match = re.match(r"\[p\d+\] ready pid=(\d+) grandchild=(\d+) sigint_at_start=(\w+)", line)
            if match:
                pids += [int(match.group(1)), int(match.group(2))]
                assert match.group(3) == "default", f"a process started with SIGINT {match.group(3)}: {line}"
            if len(pids) == 2 * NUM_PROCESSES:
                break
        assert len(pids) == 2 * NUM_PROCESSES, "".join(output)
        launcher.send_signal(sig)
        rest, _ = launcher.communicate(timeout=30)
        text = "".join(output) + rest
        assert launcher.returncode == 0, text
        assert f"received signal {int(sig)}; forwarding to every process" in text
        received = {p.name: p.read_text() for p in tmp_path.glob("p*")}
        assert received == {f"p{i}": sig.name for i in range(NUM_PROCESSES)}, text
        assert wait_gone(pids, timeout=10) == [], f"still running after the launcher exited: {text}"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        for pid in pids:  # never leave a stray process behind, even when the test fails
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
