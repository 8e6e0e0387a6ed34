"""One agreed stop for a multi-process run: SIGTERM (or SIGINT) to ANY process stops EVERY process
after the same training call, so one consistent checkpoint is written and every process exits 0.

The engine's mechanism does the agreeing. `jax.distributed.initialize` starts JAX's preemption
service: a C-level SIGTERM notifier in each process tells the coordination service, which then
fixes one call counter (the fastest process's next) at which
`jax.experimental.multihost_utils.reached_preemption_sync_point(counter)` returns True on every
process. The driver asks after every training call (`PodStopRequests.agreed`) with a per-job call
counter, 0, 1, 2, ..., the same on every process: the service tests equality, so the counters
must run consecutively from the same start (not update indices, which jump by `updates_per_call`
in Anakin).

Why JAX's sync point rather than orbax's `CheckpointManager.reached_preemption(step)`: orbax's is
the same sync point underneath, keyed by a checkpoint step, but (1) it needs a checkpoint manager,
which a run opens only at its first save (and a run without a checkpoint folder never does),
while the stop must be agreed at every call of every run; (2) it returns False when the service
is off, which would make a stop silently local again, the very bug this module removes; here
that is an error at the start of the run. Both layouts call it at the driver's call boundaries,
the one place they share.

Python's own SIGTERM handler would replace JAX's C handler (then the notice never reaches the
service), and SIGINT has no JAX handler at all. So `PodStopRequests` installs Python handlers for
both that (1) record who asked, `podrl/stop/<process index> = <signal name>` in the coordination
service's key-value store, read back at the sync point so every process's closing line names the
host(s) that asked, then (2) hand the request to JAX's notifier: JAX's SIGTERM action (saved,
as an opaque `struct sigaction`, before ours went in) is put back, SIGTERM is raised in the main
thread (delivered before `pthread_kill` returns) and ours is put back. A second signal is handled
as in a single-process run (`podrl.run.control`): a SIGINT interrupts this process at once
(KeyboardInterrupt; the others then find it lost), a SIGTERM does not undo the agreed stop and save.

Single-process runs keep `podrl.run.control.StopRequests`; `podrl.run.context.stop_requests()` picks.
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time

import jax
from jax.experimental import multihost_utils

from podrl.core.distributed import heartbeat_timeout_s
from podrl.run import outcome
from podrl.run.control import StopRequests

STOP_KEYS = "podrl/stop/"
"""Key-value directory of the coordination service where each process that got a stop signal writes it."""

_SIGACTION_BYTES = 256
"""Room for a `struct sigaction` (152 bytes on x86-64 and aarch64 Linux), treated as opaque."""


def _client():
    from jax._src.distributed import global_state

    return global_state.client


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _get_action(signum: int) -> ctypes.Array:
    """The process's current action for `signum`, as opaque bytes (`sigaction(signum, NULL, &old)`)."""
    old = ctypes.create_string_buffer(_SIGACTION_BYTES)
    if _libc().sigaction(signum, None, old) != 0:
        raise OSError(ctypes.get_errno(), f"sigaction({signum}) failed")
    return old


def _set_action(signum: int, action: ctypes.Array) -> None:
    if _libc().sigaction(signum, action, None) != 0:
        raise OSError(ctypes.get_errno(), f"sigaction({signum}) failed")


def check_service() -> None:
    """Raises RuntimeError when JAX's preemption service is not running in this multi-process run."""
    from jax._src.distributed import global_state

    if global_state.preemption_sync_manager is None:
        raise RuntimeError("a multi-process podrl run agrees on stops through JAX's preemption service, which is "
                           "not running (jax_enable_preemption_service is off?); without it a SIGTERM to one "
                           "process would stop that process alone")


class PodStopRequests(StopRequests):
    """Stop requests of one process of a multi-process run (module docstring).

    `received`: this process's own signal ("SIGTERM"/"SIGINT") or None. `agreed(call)`: whether
    every process stops after training call `call` (call it once per call, on every process).
    """

    def __init__(self):
        super().__init__()
        self.stopped = False
        self._jax_sigterm: ctypes.Array | None = None

    def __enter__(self) -> "PodStopRequests":
        check_service()
        super().__enter__()
        return self

    def _before_install(self) -> None:
        self._jax_sigterm = _get_action(signal.SIGTERM)  # JAX's C notifier: kept, handed the requests

    def _asked(self) -> None:
        _client().key_value_set(f"{STOP_KEYS}{jax.process_index()}", self.received, allow_overwrite=True)
        self._notify_jax()

    def _notify_jax(self) -> None:
        """Raises SIGTERM into JAX's own handler, which tells the preemption service."""
        ours = _get_action(signal.SIGTERM)
        _set_action(signal.SIGTERM, self._jax_sigterm)
        try:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        finally:
            _set_action(signal.SIGTERM, ours)

    def agreed(self, call: int) -> bool:
        """True when every process stops after training call `call` (0, 1, ... from this job's start)."""
        self.stopped = self.stopped or bool(multihost_utils.reached_preemption_sync_point(call))
        return self.stopped

    def askers(self) -> list[tuple[int, str]]:
        """`[(process index, signal name), ...]` of the processes that asked to stop, by index."""
        entries = _client().key_value_dir_get(STOP_KEYS)
        return sorted((int(key.rsplit("/", 1)[-1]), value) for key, value in entries)

    def reason(self) -> str | None:
        """The first asker's signal ("SIGTERM", "SIGINT") once the stop is agreed, else None."""
        if not self.stopped:
            return None
        askers = self.askers()
        return askers[0][1] if askers else "SIGTERM"

    def describe(self) -> str | None:
        """Who stopped the run, for the closing line: "SIGTERM to process 1" (None while running)."""
        if not self.stopped:
            return None
        askers = self.askers()
        if not askers:  # a SIGTERM that reached JAX's handler without passing ours
            return "SIGTERM to another process"
        by_signal: dict[str, list[int]] = {}
        for process, name in askers:
            by_signal.setdefault(name, []).append(process)
        return ", ".join(f"{name} to process{'es' if len(ps) > 1 else ''} {', '.join(map(str, ps))}"
                         for name, ps in by_signal.items())

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        if self._jax_sigterm is not None:
            _set_action(signal.SIGTERM, self._jax_sigterm)  # Python's SIG_DFL would have dropped JAX's notifier


# ---------------------------------------------------------------- a process lost for good

ALIVE_KEYS = "podrl/alive/"
"""Key-value directory where each process that survived a failed call answers."""

LOST_EXIT_CODE = outcome.LOST_EXIT_CODE
"""Exit status of a process that ends because another process of its run was lost."""


class ProcessLost(RuntimeError):
    """Another process of a multi-process run stopped answering (killed, or its host is gone)."""

    def __init__(self, lost: list[int], where: str, last_checkpoint: str):
        names = ", ".join(map(str, lost))
        super().__init__(f"process{'es' if len(lost) > 1 else ''} {names} of this run stopped answering {where} "
                         f"(killed, or its host is gone); every process of the run stops. {last_checkpoint}")
        self.lost = lost


def answer_timeout_s() -> float:
    """How long survivors wait for each other's answer: half the heartbeat timeout (JAX's
    coordination service ends every process at the heartbeat timeout), at most 10 s."""
    return min(heartbeat_timeout_s() / 2.0, 10.0)


def lost_processes(timeout_s: float) -> list[int]:
    """After a failed collective: the processes that do not answer within `timeout_s` seconds.

    Every surviving process writes `podrl/alive/<index>` into the coordination service's
    key-value store and waits until all have, or until `timeout_s`. A process busy elsewhere
    for longer (not in the failed collective) counts as lost too: the message says "stopped
    answering". If the store itself is gone, process 0 (which hosts it) is the one lost.
    """
    me, count = jax.process_index(), jax.process_count()
    client = _client()
    try:
        client.key_value_set(f"{ALIVE_KEYS}{me}", "alive", allow_overwrite=True)
        deadline = time.monotonic() + timeout_s
        while True:
            answered = {int(key.rsplit("/", 1)[-1]) for key, _ in client.key_value_dir_get(ALIVE_KEYS)}
            if len(answered) >= count or time.monotonic() > deadline:
                return sorted(set(range(count)) - answered)
            time.sleep(0.1)
    except Exception:  # the coordination service is unreachable: its host, process 0, is gone
        return [0] if me != 0 else []
