"""A second stop signal (podrl.run.control.StopRequests): a second SIGTERM (a repeated preemption notice)
does not undo the stop the first started, and says so on stderr; a second SIGINT (a person's Ctrl-C)
interrupts at once. Run in a child process, so that a handler gone wrong cannot end the test session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import os, signal, time
from podrl.run.control import StopRequests

# an interactive program's dispositions, whatever this test was started with (a background job ignores SIGINT)
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})

def send(sig):
    os.kill(os.getpid(), sig)
    time.sleep(0.2)  # the handler runs in this (main) thread, during the sleep

with StopRequests() as stops:
    send(signal.SIGTERM)
    print("after the first:", stops.received, flush=True)
    send(signal.SIGTERM)
    print("after the second:", stops.received, stops.agreed(0), flush=True)
    try:
        send(signal.SIGINT)
        print("SIGINT did not interrupt", flush=True)
    except KeyboardInterrupt:
        print("SIGINT interrupted", flush=True)
print("restored:", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, flush=True)
"""


@pytest.mark.timeout(60)
def test_a_second_sigterm_is_answered_and_the_stop_goes_on():
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=50, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout.splitlines() == ["after the first: SIGTERM", "after the second: SIGTERM True",
                                         "SIGINT interrupted", "restored: True"], child.stdout + child.stderr
    lines = child.stderr.splitlines()
    assert len(lines) == 2, f"expected a line for each SIGTERM on stderr, got {child.stderr!r}"
    first, second = lines
    assert first == "[podrl] SIGTERM: stopping cleanly after the current training call (SIGKILL ends it at once)"
    assert second.startswith("[podrl] SIGTERM again: already stopping cleanly") and "SIGKILL" in second, second
