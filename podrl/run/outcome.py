"""What a run's ending asks of whatever restarts it: retry, stop, or nothing left to do.

One rule for every restart loop: `podrl launch --supervise` (its processes' exit codes and output
lines) and the deploy scripts' loops (`podrl retry-decision --exit-code N LOG`: the exit status of
`srun` or `gcloud ... ssh --worker=all` and the job's own log). Read with the standard library
alone (no JAX), so a loop on a laptop can ask.

    retry  a preemption notice stopped the run (exit 0 and the closing line says "stopped by
           SIGTERM", the agreed stop of `podrl.run.preemption`), or a process was lost: killed by a
           signal (negative, or 128 + N as a shell reports it), exit 4 (a process whose peer
           vanished), or 255 (ssh's own failure: the worker's connection or host is gone);
    done   the run reached its total ("done at update N") or its target return;
    stop   a process's own error, exit 1, 2 or 3 (a crash, a config or input error, a stalled
           stage: a retry fails the same way), another stop (a person's Ctrl-C, the job's
           `--checkpoint.stop-after-updates`), any other exit, or an exit 0 with no closing line.
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple

USER_ERROR_EXIT_CODE = 2
"""Exit status of a command-line run refused for its input (a config error, an unknown env, ...)."""
STALL_EXIT_CODE = 3
"""Exit status of a command-line run stopped by the watchdog (`podrl.run.watchdog`)."""
LOST_EXIT_CODE = 4
"""Exit status of a process that ends because another process of its run was lost (`podrl.run.preemption`)."""
SSH_FAILED_EXIT_CODE = 255
"""ssh's exit status when ssh itself fails (the connection dropped, the host is gone)."""

STOP_AT_RETURN = "stop_at_return"
"""What stopped a run whose evaluation reached its `stop_at_return` before its total."""
STOP_AFTER_UPDATES = "stop_after_updates"
"""What stopped a run that `--checkpoint.stop-after-updates` ended before its total."""
STOPPED_BY = ("SIGTERM", "SIGINT", STOP_AT_RETURN, STOP_AFTER_UPDATES)
"""What can stop a run early: a training result's `stopped_by` is one of these, or None (it ran to its
total); the closing line says "stopped by <it>" (a pod's SIGTERM/SIGINT names the process(es) asking)."""

CLOSING = re.compile(r"(?:stopped by (?P<by>.+?)|done) at update (?P<update>\d+):")
"""A run's closing line (`podrl.run.context.RunContext.finish`), wherever it sits in a log line."""
SIGTERM_TO = re.compile(r"SIGTERM(?: to process(?:es)? (?P<who>[\d, ]+))?$")
"""The stop of a closing line that a SIGTERM (a preemption notice) asked for; a pod's names its process(es)."""
ERRORS = {1: "a crash", USER_ERROR_EXIT_CODE: "a config or input error", STALL_EXIT_CODE: "a stalled stage"}
"""A process's own errors, by exit status: a retry would fail the same way."""


class Closing:
    """What the closing lines seen so far say: the last one's stop (None: done), its update, and the
    processes a SIGTERM stop named (None when no line was a SIGTERM stop)."""

    def __init__(self):
        self.seen = False
        self.stopped_by: str | None = None
        self.update: int | None = None
        self.preempted: list[int] | None = None

    def see(self, line: str, process: int = 0) -> None:
        """Reads one output line of `process` (a single-process run's SIGTERM line names no process)."""
        match = CLOSING.search(line)
        if match is None:
            return
        self.seen, self.stopped_by, self.update = True, match.group("by"), int(match.group("update"))
        sigterm = SIGTERM_TO.match(self.stopped_by or "")
        if sigterm:
            self.preempted = [int(p) for p in (sigterm.group("who") or str(process)).replace(",", " ").split()]

    @classmethod
    def of(cls, lines: Iterable[str]) -> "Closing":
        closing = cls()
        for line in lines:
            closing.see(line)
        return closing


class Decision(NamedTuple):
    """What a restart loop does next: `action` is retry, done or stop; `why` says it in words; `gone`
    is how many processes went away (for a retry on the processes that remain)."""

    action: str
    why: str
    gone: int = 0


def signal_of(code: int) -> int | None:
    """The signal that ended a process: Python's -N, or a shell's 128 + N; None for an exit."""
    if code < 0:
        return -code
    return code - 128 if 128 < code < 128 + 65 else None


def decide(code: int, closing: Closing, signalled: bool = False) -> Decision:
    """The next step after a run whose first failure exited `code` (0: every process exited 0) and
    whose output held `closing`; `signalled`: the loop itself was asked to stop (module doc)."""
    if signalled:
        return Decision("stop", "the loop itself was signalled")
    if code == 0:
        return _after_exit_0(closing)
    if code in ERRORS:
        return Decision("stop", f"a process's own error (exit {code}: {ERRORS[code]}); a retry would fail the same way")
    if code == LOST_EXIT_CODE:
        return Decision("retry", "a process lost a peer of its run (exit 4)", gone=1)
    if signal_of(code) is not None:
        return Decision("retry", f"a process was killed by signal {signal_of(code)} (lost)", gone=1)
    if code == SSH_FAILED_EXIT_CODE:
        return Decision("retry", "the remote shell's connection failed (exit 255): a worker is gone", gone=1)
    return Decision("stop", f"exit {code}, which no podrl run gives")


def _after_exit_0(closing: Closing) -> Decision:
    if closing.preempted is not None:
        return Decision("retry", f"stopped by {closing.stopped_by} at update {closing.update} (a preemption notice)",
                        gone=len(set(closing.preempted)))
    if not closing.seen:
        return Decision("stop", "every process exited 0 but no closing line was seen (is this a podrl run's log?)")
    if closing.stopped_by is None:
        return Decision("done", f"done at update {closing.update}")
    if closing.stopped_by == STOP_AT_RETURN:
        return Decision("done", f"reached its target return at update {closing.update}")
    return Decision("stop", f"stopped by {closing.stopped_by} at update {closing.update}")
