"""How long a checkpoint holds training up, and how long a preempted pod takes to stop (issue 38).

Each row is the training state of a preset (replay buffers included):

  cartpole-ppo  podrl anakin --preset cartpole-ppo
  minatar-ppo   podrl anakin --preset minatar-ppo
  minatar-pqn   podrl anakin --preset minatar-pqn
  minatar-ppo-4 podrl anakin --preset minatar-ppo --updates-per-call 4   (the same state, calls of 4 updates, not 32)
  pong-ppo      podrl sebulba --preset atari-ppo
  pong-dqn      podrl sebulba --preset atari-ppo agent:dqn --agent.torso nature_cnn   (a 50k-transition buffer)

and two measurements:

  stall    one process, one CPU device, in a child: the seconds a save keeps the training loop
           waiting, synchronous (written and hashed before `save` returns, as podrl saved before
           issue 38) and asynchronous (orbax's async checkpointing, the digest hashed in the
           background: `podrl.run.checkpoint`), and the seconds until the asynchronous save is on
           disk. A jitted call that donates the whole state runs right after each save, as the next
           training call would (its seconds are reported: on CPU a save in flight keeps the runtime
           from donating the buffers it reads, so the call copies them). Replay buffers are filled
           with random bytes first (a full buffer that does not compress). Medians of --repeats.
  signal   `podrl launch` of two processes x 1 CPU device training the preset; once process 0 reports
           progress, SIGTERM to process 1 only: seconds from the signal to the agreed stop (process
           0's closing line, printed when the final save has started) and to the last process's exit
           (the final save on disk). The stop comes at a training-call boundary, so a call's length
           (`--updates-per-call` in Anakin) bounds the first figure.

    python -m benchmarks.checkpoint --repeats 3 --out checkpoint.json
    python -m benchmarks.checkpoint --skip-signal --repeats 5 --out stall.json    # the stall, 5 saves per mode
    python -m benchmarks.checkpoint --skip-stall --repeats 2 --out signal.json    # the signal runs only
    python -m benchmarks.checkpoint --quick          # smoke test: cartpole-ppo only, one repeat
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from benchmarks.harness import (
    ROOT,
    child_env,
    configure_cpu_devices,
    dispatch,
    emit_result,
    finish,
    fmt,
    interleave,
    load_note,
    loads_of,
    median_of,
    new_parser,
    run_child,
    table,
)

MODULE = "benchmarks.checkpoint"
STATES = {
    "cartpole-ppo": ("anakin", ["--preset", "cartpole-ppo"]),
    "minatar-ppo": ("anakin", ["--preset", "minatar-ppo"]),
    "minatar-pqn": ("anakin", ["--preset", "minatar-pqn"]),
    "minatar-ppo-4": ("anakin", ["--preset", "minatar-ppo", "--updates-per-call", "4"]),
    "pong-ppo": ("sebulba", ["--preset", "atari-ppo", "--timeout-s", "900"]),
    "pong-dqn": ("sebulba", ["--preset", "atari-ppo", "--timeout-s", "900", "agent:dqn", "--agent.torso",
                             "nature_cnn"]),
}
"""Row name -> (layout, the training command's flags). Sebulba's waits may take longer than its default 60 s
here: two processes share two loaded cores, and one DQN update of 256 Nature-CNN gradient steps takes minutes."""


def build_program(name: str):
    """The preset's host program (built as `podrl <layout>` builds it) on this process's one device."""
    from podrl.cli.flags import resolve

    layout, argv = STATES[name]
    experiment = resolve(layout, argv + ["--eval-episodes", "0"])
    if layout == "anakin":
        from podrl.anakin.program import AnakinProgram
        from podrl.anakin.setup import build

        return AnakinProgram(experiment.run, build(experiment.run, experiment.agent))
    from podrl.sebulba.program import SebulbaProgram
    from podrl.sebulba.setup import build

    return SebulbaProgram(experiment.run, build(experiment.run, experiment.agent))


def filled(state):
    """`state` with every replay leaf (`shard_state`) random: a full buffer's bytes, incompressible
    (drawn on the host: a jitted draw of a 1.4 GB uint8 leaf needs over 30 GB on XLA:CPU)."""
    import jax
    import numpy as np

    train_state = getattr(state, "train_state", state)
    rng = np.random.default_rng(0)

    def noise(x):
        host = rng.standard_normal(x.shape, np.float32) if np.issubdtype(x.dtype, np.floating) \
            else np.frombuffer(rng.bytes(x.size * x.dtype.itemsize), x.dtype).reshape(x.shape)
        return jax.device_put(host.astype(x.dtype, copy=False), x.sharding)

    train_state = train_state._replace(shard_state=jax.tree.map(noise, train_state.shard_state))
    return state._replace(train_state=train_state) if hasattr(state, "train_state") else train_state


def measure_stall(name: str, repeats: int) -> dict[str, Any]:
    """The stall measurement of one row (module docstring), in this (child) process."""
    import jax

    from podrl.run.checkpoint import Checkpointer
    from podrl.run.digest import is_key

    program = build_program(name)
    try:
        state = filled(program.init())
        touch = jax.jit(lambda s: jax.tree.map(lambda x: x if is_key(x) else x + 0, s), donate_argnums=0)
        state_bytes = sum(x.nbytes for x in jax.tree.leaves(state))
        out: dict[str, list[float]] = {"sync_stall": [], "async_stall": [], "async_on_disk": [], "sync_call": [],
                                       "async_call": []}
        with tempfile.TemporaryDirectory(dir=os.environ.get("PODRL_BENCH_TMP")) as folder:
            checkpointer = Checkpointer(folder, keep=2)
            checkpointer.save(0, state, program.params(state), {}, wait=True)  # the manager's first save
            for step in range(1, 2 * repeats + 1):
                mode = "sync" if step % 2 else "async"
                start = time.perf_counter()
                checkpointer.save(step, state, program.params(state), {}, wait=mode == "sync")
                saved = time.perf_counter()
                state = jax.block_until_ready(touch(state))
                called = time.perf_counter()
                checkpointer.wait()
                out[f"{mode}_stall"].append(saved - start)
                out[f"{mode}_call"].append(called - saved)
                if mode == "async":
                    out["async_on_disk"].append(time.perf_counter() - start)
            checkpointer.close()
    finally:
        program.close()
    return {"state_bytes": state_bytes, **{k: sorted(v)[len(v) // 2] for k, v in out.items()}, "runs": out}


def measure_signal(name: str, timeout: float) -> dict[str, Any]:
    """The signal measurement of one row (module docstring): a 2-process pod, SIGTERM to process 1."""
    layout, argv = STATES[name]
    with tempfile.TemporaryDirectory(dir=os.environ.get("PODRL_BENCH_TMP")) as folder:
        command = [sys.executable, "-m", "podrl", "launch", "--num-processes", "2", "--", sys.executable, "-m",
                   "podrl", layout, *argv, "--eval-episodes", "0", "--checkpoint.directory",
                   os.path.join(folder, "ckpt"), "--logging.run-dir", folder, "--logging.no-tensorboard"]
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                env=child_env(), start_new_session=True)
        seen: dict[str, float] = {}
        pids: dict[int, int] = {}
        tail: collections.deque[str] = collections.deque(maxlen=12)  # the pod's last lines, for a failed run
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        try:
            for line in proc.stdout:
                tail.append(line.rstrip())
                match = re.match(r"\[launcher\] process (\d+): pid (\d+)", line)
                if match:
                    pids[int(match.group(1))] = int(match.group(2))
                if line.startswith(f"[p0] [{layout}] step ") and "signal" not in seen:
                    os.kill(pids[1], signal.SIGTERM)
                    seen["signal"] = time.perf_counter()
                stop = re.match(rf"\[p0\] \[{layout}\] stopped by (.+) at update (\d+)", line)
                if stop:
                    seen["agreed"], seen["update"], seen["by"] = time.perf_counter(), int(stop.group(2)), stop.group(1)
            code = proc.wait()
            exited = time.perf_counter()
        finally:
            timer.cancel()
    result = {"wall_seconds": time.perf_counter() - start, "load_1m": os.getloadavg()[0], "exit_code": code}
    if code != 0 or "agreed" not in seen:
        return {**result, "error": f"exit code {code}, stop seen: {'agreed' in seen}", "output_tail": list(tail)}
    return {**result, "to_stop_s": seen["agreed"] - seen["signal"], "to_exit_s": exited - seen["signal"],
            "stop_update": seen["update"], "stopped_by": seen["by"]}


def child_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    configure_cpu_devices(1)
    emit_result(measure_stall(spec["name"], spec["repeats"]))
    return 0


def parse_args(argv: list[str] | None = None):
    parser = new_parser(__doc__, quick="cartpole-ppo only, one repeat (smoke test)", repeats=3,
                        repeats_help="saves per mode in a stall run, and signal runs per row (medians reported)",
                        timeout=1800.0, child=True)
    parser.add_argument("--only", nargs="+", choices=sorted(STATES), help="these rows only")
    parser.add_argument("--skip-signal", action="store_true", help="the stall measurement only")
    parser.add_argument("--skip-stall", action="store_true", help="the signal measurement only")
    return parser.parse_args(argv)


def run(args, start: float) -> int:
    names = ["cartpole-ppo"] if args.quick else (args.only or list(STATES))
    repeats = 1 if args.quick else args.repeats
    rows = []
    for name in [] if args.skip_stall else names:
        stall = run_child(MODULE, {"name": name, "repeats": repeats}, args.timeout)
        rows.append({"name": name, "measurement": "stall", **stall})
        print(f"{name} stall: {json.dumps({k: v for k, v in stall.items() if k != 'runs'})}", file=sys.stderr)
    if not args.skip_signal:
        runs = interleave(names, repeats, lambda name, _: measure_signal(name, args.timeout), lambda name: name)
        rows += [{"name": name, "measurement": "signal", **r} for name, name_runs in zip(names, runs)
                 for r in name_runs]
    return finish("checkpoint", args, rows, markdown(rows, names), start)


def markdown(rows: list[dict[str, Any]], names: list[str]) -> str:
    def of(name: str, measurement: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["name"] == name and r["measurement"] == measurement and "error" not in r]

    cells = []
    for name in names:
        stall, signals = (of(name, "stall") or [{}])[0], of(name, "signal")
        cells.append([name, fmt(stall.get("state_bytes", 0) / 2**20 if stall else None, ",.1f"),
                      fmt(stall.get("sync_stall"), ".3f"), fmt(stall.get("async_stall"), ".3f"),
                      fmt(stall.get("async_on_disk"), ".2f"), fmt(stall.get("sync_call"), ".3f"),
                      fmt(stall.get("async_call"), ".3f"), fmt(median_of(signals, "to_stop_s"), ".1f"),
                      fmt(median_of(signals, "to_exit_s"), ".1f")])
    text = table(["state", ">MiB", ">stall sync, s", ">stall async, s", ">async on disk, s", ">next call after sync, s",
                  ">next call after async, s", ">signal to stop, s", ">signal to last exit, s"], cells)
    errors = [f"{r['name']} {r['measurement']}: {r['error'].splitlines()[0]}" for r in rows if "error" in r]
    return text + "\n" + load_note(loads_of(rows)) + ("\n\nErrors: " + "; ".join(errors) if errors else "")


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, parse_args, child_main, run)


if __name__ == "__main__":
    sys.exit(main())
