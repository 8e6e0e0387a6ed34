"""`podrl launch`: run a podrl training command as N local processes, a CPU "pod" on one machine.

    podrl launch --num-processes 2 --devices-per-process 2 -- podrl anakin --num-envs 8

Each process gets `--coordinator 127.0.0.1:<port> --num-processes N --process-id i
--cpu-devices K` appended to the command (the coordinator binds to loopback
unless --host says otherwise). Output lines are prefixed with `[p<i>]`. If any
process exits non-zero, the others are stopped and the launcher exits non-zero,
naming the process that failed first. Ctrl-C (SIGINT) and SIGTERM are forwarded.
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

GRACE_S = 10.0


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def child_command(command: list[str], args: argparse.Namespace, port: int, index: int) -> list[str]:
    return command + [
        "--coordinator", f"{args.host}:{port}", "--num-processes", str(args.num_processes),
        "--process-id", str(index), "--cpu-devices", str(args.devices_per_process),
    ]


def pump(index: int, stream, lock: threading.Lock) -> None:
    """Copies a child's output to ours, one prefixed line at a time."""
    for line in iter(stream.readline, ""):
        with lock:
            sys.stdout.write(f"[p{index}] {line}")
            sys.stdout.flush()
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
    """Waits for all processes; on the first failure stops the rest. Returns (exit code, first failed)."""
    while True:
        codes = [proc.poll() for proc in procs]
        failed = [i for i, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            first = failed[0]
            print(f"[launcher] process {first} exited with code {codes[first]} first; stopping the others",
                  flush=True)
            stop_all(procs)
            return 1, first
        if all(code == 0 for code in codes):
            return 0, None
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-processes", type=int, default=2, help="processes to start (>= 1)")
    parser.add_argument("--devices-per-process", type=int, default=1, help="fake CPU devices per process")
    parser.add_argument("--host", default="127.0.0.1", help="coordinator address (loopback by default)")
    parser.add_argument("--port", type=int, default=0, help="coordinator port (0: pick a free one)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the training command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the training command after --")
    if args.num_processes < 1 or args.devices_per_process < 1:
        parser.error("--num-processes and --devices-per-process must be >= 1")
    port = args.port or free_port(args.host)
    lock = threading.Lock()
    procs: list[subprocess.Popen] = []
    pumps: list[threading.Thread] = []

    def forward(sig, _frame):
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
    for i in range(args.num_processes):
        proc = subprocess.Popen(child_command(command, args, port, i), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        print(f"[launcher] process {i}: pid {proc.pid}", flush=True)
        procs.append(proc)
        pumps.append(threading.Thread(target=pump, args=(i, proc.stdout, lock), daemon=True))
        pumps[-1].start()
    try:
        code, _ = supervise(procs)
    finally:
        stop_all(procs, signal.SIGKILL)
        kill_leftovers(procs)
        for thread in pumps:
            thread.join(timeout=5)
    return code
