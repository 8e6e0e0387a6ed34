"""`podrl launch`: run a podrl training command as N local processes, a CPU "pod" on one machine.

    podrl launch --num-processes 2 --devices-per-process 2 -- podrl anakin --num-envs 8

Each process gets `--coordinator 127.0.0.1:<port> --num-processes N --process-id i --cpu-devices K
--share-compiles` appended to the command, and JAX_COORDINATOR_BIND_ADDRESS=<host>:<port> in its
environment: process 0's coordinator service listens on --host alone (loopback by default), not on
every interface (JAX's default), whatever the command (podrl's own runs bind a loopback coordinator
there anyway: `podrl.core.cluster_env.bind_address`). Every process runs on this machine, so process 0 compiles each
program that spans processes and
the others load its binary (`podrl.core.shared_compiles`).
Output lines are prefixed with `[p<i>]`. If any process exits non-zero, the others get
`LOSS_GRACE_S` to stop on their own (a podrl process that loses a peer says so and exits), are
then stopped, and the launcher exits non-zero, naming the process that failed first. Ctrl-C (SIGINT) and SIGTERM
are forwarded (a podrl run then stops every process at one update, checkpoint first).

Supervisor (`--supervise N`): the loop that brings a pod back, by the rule every restart loop
follows (`podrl.run.outcome`, which the deploy scripts ask through `podrl retry-decision`). After
an attempt that a preemption notice ended (every process exited 0, the closing line says "stopped
by SIGTERM to process 1 ...") or that lost a process (the first process to fail was killed by a
signal, or exited 4 naming a lost peer), the launcher relaunches the command with
`--resume <--checkpoint.directory>` on the processes that remain (or `--relaunch-processes`), up
to N times. It does not relaunch after a run that finished, after a process's own error (exit 1,
2, 3: a relaunch would fail the same way), after SIGINT (a person's Ctrl-C), or when the launcher
itself was signalled (someone wants it stopped). After a lost process it names the last good checkpoint, which a
survivor that JAX's heartbeat ended could not say.
`--simulate-preemption I` sends SIGTERM to process I of the first attempt once process 0
has compiled, as a Spot VM's preemption notice would: the whole cycle on one machine.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Callable

from podrl.run import outcome
from podrl.run.checkpoint_folder import complete_steps

GRACE_S = 10.0
"""Seconds a signalled process gets to exit before it is killed."""
LOSS_GRACE_S = 30.0
"""After a process failed, seconds the others get to stop on their own first: a podrl process that
loses a peer says so, naming it and the last good checkpoint, and exits within 10 s
(`podrl.run.preemption.lost_processes`); a SIGTERM would instead ask it for an agreed stop the
lost peer can never join."""


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def child_command(command: list[str], args: argparse.Namespace, port: int, index: int, processes: int) -> list[str]:
    return command + [
        "--coordinator", f"{args.host}:{port}", "--num-processes", str(processes),
        "--process-id", str(index), "--cpu-devices", str(args.devices_per_process), "--share-compiles",
    ]


def pump(index: int, stream, lock: threading.Lock, on_line: Callable[[int, str], None]) -> None:
    """Copies a child's output to ours, one prefixed line at a time, and shows each line to `on_line`."""
    for line in iter(stream.readline, ""):
        with lock:
            sys.stdout.write(f"[p{index}] {line}")
            sys.stdout.flush()
        on_line(index, line)
    stream.close()


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def stop_all(procs: list[subprocess.Popen], sig: int = signal.SIGTERM) -> None:
    """Signals every live process group, then kills what is left after the grace period."""
    for proc in procs:
        if proc.poll() is None:
            signal_group(proc, sig)
    deadline = time.monotonic() + GRACE_S
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            proc.wait()


def wait_all(procs: list[subprocess.Popen], timeout: float) -> None:
    """Waits up to `timeout` seconds for every process to exit by itself."""
    deadline = time.monotonic() + timeout
    while any(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
        time.sleep(0.1)


def kill_leftovers(procs: list[subprocess.Popen]) -> None:
    """SIGKILLs every process group, also those whose leader has exited.

    A process's own children share its group (each process starts a session of its own);
    one that outlived its parent (it ignored the signal, or the parent never waited for
    it) would otherwise be orphaned. A group's id cannot be reused while it has members,
    so this reaches only what we started.
    """
    for proc in procs:
        signal_group(proc, signal.SIGKILL)


def supervise(procs: list[subprocess.Popen]) -> tuple[int, int | None]:
    """Waits for all processes; on the first failure lets the others stop on their own for
    `LOSS_GRACE_S`, then stops the rest. Returns (exit code, first failed)."""
    while True:
        codes = [proc.poll() for proc in procs]
        failed = [i for i, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            first = failed[0]
            print(f"[launcher] process {first} exited with code {codes[first]} first; stopping the others",
                  flush=True)
            wait_all(procs, LOSS_GRACE_S)
            stop_all(procs)
            print(f"[launcher] exit codes: {[proc.returncode for proc in procs]}", flush=True)
            return 1, first
        if all(code == 0 for code in codes):
            return 0, None
        time.sleep(0.1)


class Attempt:
    """One launch of the command's processes: what the supervisor decides from."""

    def __init__(self, processes: int):
        self.processes = processes
        self.procs: list[subprocess.Popen] = []
        self.code, self.first_failed, self.first_code = 0, None, None
        self.closing = outcome.Closing()  # what the processes' closing lines say
        self.compiled = threading.Event()  # process 0 said it has compiled

    def see(self, index: int, line: str) -> None:
        self.closing.see(line, index)
        if index == 0 and "compiled in" in line:
            self.compiled.set()


def run_attempt(command: list[str], args: argparse.Namespace, processes: int, simulate: int | None,
                procs_out: list[subprocess.Popen]) -> Attempt:
    """Starts `processes` processes of `command`, waits for them (`supervise`); with `simulate`,
    SIGTERMs that process once process 0 has compiled. `procs_out` sees the live processes (for
    the signal handler)."""
    attempt, lock, pumps = Attempt(processes), threading.Lock(), []
    port = args.port or free_port(args.host)
    for i in range(processes):
        proc = subprocess.Popen(child_command(command, args, port, i, processes), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                env={**os.environ, "JAX_COORDINATOR_BIND_ADDRESS": f"{args.host}:{port}"})
        print(f"[launcher] process {i}: pid {proc.pid}", flush=True)
        attempt.procs.append(proc)
        procs_out[:] = attempt.procs
        pumps.append(threading.Thread(target=pump, args=(i, proc.stdout, lock, attempt.see), daemon=True))
        pumps[-1].start()
    if simulate is not None:
        threading.Thread(target=_preempt, args=(attempt, simulate), daemon=True).start()
    try:
        attempt.code, attempt.first_failed = supervise(attempt.procs)
        if attempt.first_failed is not None:
            attempt.first_code = attempt.procs[attempt.first_failed].returncode
    finally:
        stop_all(attempt.procs, signal.SIGKILL)
        kill_leftovers(attempt.procs)
        for thread in pumps:
            thread.join(timeout=5)
    return attempt


def _preempt(attempt: Attempt, index: int) -> None:
    """What a Spot VM's preemption notice does to process `index`: SIGTERM, once process 0 compiled."""
    while not attempt.compiled.wait(0.2):
        if all(proc.poll() is not None for proc in attempt.procs):
            return
    print(f"[launcher] simulating a preemption: SIGTERM to process {index}", flush=True)
    signal_group(attempt.procs[index], signal.SIGTERM)


def next_processes(attempt: Attempt, signalled: bool, relaunch: int | None) -> int | None:
    """The process count of the relaunch after `attempt`, or None when the supervisor stops
    (`podrl.run.outcome.decide`: the rule of every restart loop)."""
    code = attempt.first_code if attempt.code != 0 and attempt.first_code is not None else attempt.code
    decision = outcome.decide(code, attempt.closing, signalled)
    if decision.action != "retry":
        return None
    return relaunch or max(1, attempt.processes - decision.gone)


def option_value(command: list[str], flag: str) -> str | None:
    """The value of `flag` (`--flag V` or `--flag=V`) in `command`, the last one given, else None."""
    value = None
    for i, word in enumerate(command):
        if word == flag and i + 1 < len(command):
            value = command[i + 1]
        elif word.startswith(flag + "="):
            value = word.partition("=")[2]
    return value


def last_checkpoint(directory: str | None) -> int | None:
    """The latest complete checkpoint's update in `directory` (an orbax step folder is named by its
    step alone; one being written has a suffix), printed with the folder; None when there is none."""
    steps = complete_steps(directory)
    if directory is not None:
        print(f"[launcher] last good checkpoint: update {max(steps)} in {directory}" if steps
              else f"[launcher] no complete checkpoint in {directory}", flush=True)
    return max(steps) if steps else None


def resumed(command: list[str], directory: str) -> list[str]:
    """`command` resuming from `directory` (an earlier `--resume` dropped) when it holds a complete
    checkpoint; else `command` as it is (a relaunch from the start)."""
    if last_checkpoint(directory) is None:
        return command
    out, skip = [], False
    for word in command:
        if skip or word.startswith(("--resume=", "--checkpoint.resume=")):
            skip = False
            continue
        skip = word in ("--resume", "--checkpoint.resume")
        if not skip:
            out.append(word)
    return out + ["--resume", directory]


def main(argv: list[str] | None = None) -> int:
    args, command = _parse(argv)
    procs: list[subprocess.Popen] = []
    signalled = threading.Event()

    def forward(sig, _frame):
        signalled.set()
        print(f"[launcher] received signal {sig}; forwarding to every process", flush=True)
        for proc in procs:
            if proc.poll() is None:
                signal_group(proc, sig)

    # Our own handlers go in before any process starts: a started program inherits an ignored
    # signal but not a handled one, so the processes (and what they start) get SIGINT at its
    # default even when the launcher itself was started with SIGINT ignored (a background job
    # of a non-interactive shell is), and a forwarded SIGINT reaches them.
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    processes, simulate = args.num_processes, args.simulate_preemption
    for relaunch in range(args.supervise + 1):
        attempt = run_attempt(command, args, processes, simulate, procs)
        following = next_processes(attempt, signalled.is_set(), args.relaunch_processes)
        if following is None or relaunch == args.supervise:
            if attempt.first_code is not None and attempt.first_code < 0:
                last_checkpoint(args.checkpoint_dir)  # a lost process: where to resume from
            return attempt.code
        why = "a stop signal" if attempt.code == 0 else f"process {attempt.first_failed} was lost"
        print(f"[launcher] {why}: relaunch {relaunch + 1} of {args.supervise} on {following} process(es), "
              f"resuming", flush=True)
        command, processes, simulate = resumed(command, args.checkpoint_dir), following, None
    return attempt.code


def _parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-processes", type=int, default=2, help="processes to start (>= 1)")
    parser.add_argument("--devices-per-process", type=int, default=1, help="fake CPU devices per process")
    parser.add_argument("--host", default="127.0.0.1", help="coordinator address (loopback by default)")
    parser.add_argument("--port", type=int, default=0, help="coordinator port (0: pick a free one)")
    parser.add_argument("--supervise", type=int, default=0, metavar="N",
                        help="relaunch with --resume after a stop signal or a lost process, up to N times")
    parser.add_argument("--relaunch-processes", type=int, default=None, metavar="K",
                        help="processes of a relaunch (default: those that remain, at least 1)")
    parser.add_argument("--simulate-preemption", type=int, default=None, metavar="I",
                        help="SIGTERM process I once process 0 has compiled (first attempt), as a Spot VM's notice")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the training command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the training command after --")
    if args.num_processes < 1 or args.devices_per_process < 1:
        parser.error("--num-processes and --devices-per-process must be >= 1")
    if args.supervise < 0 or (args.relaunch_processes is not None and args.relaunch_processes < 1):
        parser.error("--supervise must be >= 0 and --relaunch-processes >= 1")
    if args.simulate_preemption is not None and not 0 <= args.simulate_preemption < args.num_processes:
        parser.error(f"--simulate-preemption must name a process, 0 .. {args.num_processes - 1}")
    args.checkpoint_dir = option_value(command, "--checkpoint.directory")
    if args.supervise and args.checkpoint_dir is None:
        parser.error("--supervise needs --checkpoint.directory in the training command: the folder every process "
                     "saves to and a relaunch resumes from")
    return args, command
