"""`--profile DIR`: a `jax.profiler` trace of a few training calls, to read in perfetto or TensorBoard.

The trace skips the first call (it can carry one-time work) when the run has more than
one, and covers `count` calls from there. Open `DIR/plugins/profile/<time>/*.trace.json.gz`
at https://ui.perfetto.dev, or point TensorBoard's profile plugin at DIR.
"""

from __future__ import annotations

import collections
import glob
import gzip
import json
import math
import os
import re
from typing import Any

import jax


class CallProfiler:
    """Starts a trace before call `first` and stops it after call `first + count - 1` (0-based)."""

    def __init__(self, directory: str | None, total_calls: int, count: int = 1):
        self.directory = directory
        self.first = 1 if total_calls > 1 else 0
        self.last = min(self.first + count, total_calls) - 1
        self.active = False

    def before(self, call: int) -> None:
        """Call before running call number `call`."""
        if self.directory and call == self.first and not self.active:
            jax.profiler.start_trace(self.directory)
            self.active = True

    def after(self, call: int) -> None:
        """Call after call number `call` finished (its results on the host)."""
        if self.active and call >= self.last:
            self.stop()

    def stop(self) -> None:
        """Ends the trace if one is running (also on an early stop)."""
        if self.active:
            jax.profiler.stop_trace()
            self.active = False
            print(f"profile of training call(s) {self.first}..{self.last} written to {self.directory}", flush=True)


# ---------------------------------------------------------------- reading a trace

PROGRAM_TEXT = "train_call.hlo.txt"
"""What `--profile` writes beside the trace (Anakin): the compiled train call's optimized HLO,
whose op names (`while.365`, `conditional.2`) are the names of the trace's XLA:CPU thunks."""

_CONTROL_OPCODES = ("while", "conditional", "call")
_CONTROL = _CONTROL_OPCODES + ("cond",)  # thunk name stems of control flow (a conditional's thunk may be `cond.N`)
_NOT_THUNKS = ("ThunkExecutor", "PjitFunction", "ThreadpoolListener", "end:")


def write_program_text(directory: str | None, text: str) -> None:
    """Writes the compiled program's HLO text into `directory` (no-op without one)."""
    if directory:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, PROGRAM_TEXT), "w") as f:
            f.write(text)


def loop_labels(hlo_text: str) -> dict[str, str]:
    """`{op name: label}` for the control-flow ops (while, conditional) of an optimized HLO module.

    A label is the op's innermost source line in the project (the first frame outside
    site-packages, e.g. `podrl/anakin/rollout.py:83`) and the tail of its JAX op name; loops
    JAX itself makes are named by their op name (e.g. the rolled `threefry2x32` rounds
    that `jax.random` runs on CPU).
    """
    files = _numbered(hlo_text, "FileNames", r'(\d+) "(.*)"')
    locations = {k: (int(m.group(2)), int(m.group(3))) for k, m in _numbered_matches(
        hlo_text, "FileLocations", r"(\d+) \{file_name_id=(\d+) function_name_id=\d+ line=(\d+)")}
    frames = {k: (int(m.group(2)), int(m.group(3))) for k, m in _numbered_matches(
        hlo_text, "StackFrames", r"(\d+) \{file_location_id=(\d+) parent_frame_id=(\d+)")}
    labels = {}
    op = re.compile(r'^\s*(?:ROOT )?%([\w.-]+) = .*? (?:while|conditional|call)\(.*?'
                    r'metadata=\{op_name="([^"]*)"(?: stack_frame_id=(\d+))?')
    for line in hlo_text.splitlines():
        m = op.match(line)
        if not m:
            continue
        name, op_name, frame = m.group(1), m.group(2), m.group(3)
        where = _project_line(int(frame), frames, locations, files) if frame else None
        tail = "/".join(p for p in op_name.split("/")[-3:] if p)
        labels[name] = f"{where} ({tail})" if where else tail
    return labels


def thunk_paths(hlo_text: str) -> dict[str, tuple[str, ...]]:
    """`{instruction name: enclosing control-flow ops, outermost first}` for an optimized HLO
    module: which loops (while), branches (conditional) and calls run each instruction.

    A trace's thunks carry their instruction's name, so this charges every thunk to its
    loops exactly, whichever executor thread ran it."""
    owner, callers, _ = _parse_instructions(hlo_text)
    return _enclosing(owner, callers)


def _enclosing(owner: dict[str, str], callers: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """`thunk_paths` from `_parse_instructions`'s first two maps."""

    def chain(name: str) -> tuple[str, ...]:
        out: list[str] = []
        comp = owner.get(name)
        while comp in callers and len(out) < 64:
            op = callers[comp]
            out.append(op)
            comp = owner.get(op)
        return tuple(reversed(out))

    return {name: chain(name) for name in owner}


def _parse_instructions(hlo_text: str) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(instruction -> its computation, computation -> the control op running it, instruction -> opcode,
    e.g. `psum_invariant.118` -> `all-reduce`)."""
    computation = None
    owner: dict[str, str] = {}
    callers: dict[str, str] = {}
    opcodes: dict[str, str] = {}
    header = re.compile(r"^(?:ENTRY )?%([\w.-]+) ")
    instruction = re.compile(r"^\s*(?:ROOT )?%([\w.-]+) = ")
    called = re.compile(r"(?:body|condition|to_apply|true_computation|false_computation)=%([\w.-]+)"
                        r"|branch_computations=\{([^}]*)\}")
    for line in hlo_text.splitlines():
        m = header.match(line)
        if m and line.rstrip().endswith("{"):
            computation = m.group(1)
            continue
        m = instruction.match(line)
        if not m or computation is None:
            continue
        name, opcode = m.group(1), _opcode(line[m.end():])
        owner[name], opcodes[name] = computation, opcode
        if opcode in _CONTROL_OPCODES:
            for c in called.finditer(line):
                for target in ([c.group(1)] if c.group(1) else re.findall(r"%([\w.-]+)", c.group(2))):
                    callers[target] = name
    return owner, callers, opcodes


def _opcode(rest: str) -> str:
    """The opcode after an instruction's `= `: skips its shape (a token, or a tuple in parentheses)."""
    i = 0
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += (ch == "(") - (ch == ")")
            if depth == 0:
                break
        i += 1
    else:
        i = rest.find(" ")
    m = re.match(r"\s*([\w-]+)\(", rest[i:])
    return m.group(1) if m else ""


def _numbered_matches(text: str, section: str, pattern: str):
    start = text.find("\n" + section + "\n")
    if start < 0:
        return []
    body = text[start + len(section) + 2:].split("\n\n", 1)[0]
    return [(int(m.group(1)), m) for m in (re.match(pattern, line) for line in body.splitlines()) if m]


def _numbered(text: str, section: str, pattern: str) -> dict[int, str]:
    return {k: m.group(2) for k, m in _numbered_matches(text, section, pattern)}


def _project_line(frame: int, frames, locations, files) -> str | None:
    seen = set()
    while frame in frames and frame not in seen:
        seen.add(frame)
        location, parent = frames[frame]
        file_id, line = locations.get(location, (0, 0))
        path = files.get(file_id, "")
        if path and "site-packages" not in path and not path.startswith("<"):
            return f"{_short(path)}:{line}"
        frame = parent
    return None


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    for i, part in enumerate(parts):
        if part in ("podrl", "agents", "envs", "scripts", "tests"):
            return "/".join(parts[i:])
    return "/".join(parts[-2:])


def find_trace(directory: str) -> str:
    """The newest `*.trace.json.gz` under `directory` (what `jax.profiler` writes)."""
    found = sorted(glob.glob(os.path.join(directory, "**", "*.trace.json.gz"), recursive=True), key=os.path.getmtime)
    if not found:
        raise FileNotFoundError(f"no *.trace.json.gz under {directory}")
    return found[-1]


def summarize_trace(trace_file: str, hlo_text: str | None = None, top: int = 12,
                    within: str | None = None) -> dict[str, Any]:
    """Where an XLA:CPU program spent its thunks, from a `jax.profiler` trace.

    XLA:CPU records one event per executed thunk (a fusion, a copy, a dot, a collective)
    and one per control-flow op around them. With the program's optimized HLO (`hlo_text`,
    what `--profile` writes in Anakin) each thunk is charged to its enclosing loops exactly
    (`thunk_paths`) and they are named by source line (`loop_labels`); without it, to the
    loops running when it started on any thread (the executor moves work between threads,
    so this is approximate). `within` keeps only thunks whose loop path mentions it (e.g.
    `rollout.py`). Returns
    `{"thunks", "thunk_ms", "span_ms", "threads", "loops", "kinds", "collectives"}`:
    `loops` is a list of `{"path", "thunks", "ms"}` (most thunks first), `kinds` the op
    kinds (`copy`, `fusion`, `dot`, ...) with counts and ms, `threads` the thunk count
    per thread. Durations include the tracer's own cost per event, so compare counts
    between programs and durations only within one trace. A trace holds at most 1e6 events;
    profile few updates per call (`--updates-per-call`) to see whole calls.
    """
    labels = loop_labels(hlo_text) if hlo_text else {}
    owner, callers, opcodes = _parse_instructions(hlo_text) if hlo_text else ({}, {}, {})
    paths = _enclosing(owner, callers)
    with gzip.open(trace_file) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e.get("ph") == "X" and not e["name"].startswith(("$",) + _NOT_THUNKS)]
    events.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    loops: dict[tuple, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    kinds: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    threads: collections.Counter = collections.Counter()
    collectives: collections.Counter = collections.Counter()
    first, last = math.inf, -math.inf
    active: list[dict] = []  # control-flow events running now, on any thread (the executor hops threads)
    for e in events:
        active = [a for a in active if a["ts"] + a.get("dur", 0) > e["ts"]]
        name, kind = e["name"], _kind(e["name"])
        if name in labels or kind in _CONTROL:
            active.append(e)
            continue
        nest = paths[name] if name in paths else tuple(a["name"] for a in active)
        path = tuple(dict.fromkeys(labels.get(n, n) for n in nest))
        if within and not any(within in p for p in path):
            continue
        dur = e.get("dur", 0) / 1e3
        loops[path][0] += 1
        loops[path][1] += dur
        kinds[kind][0] += 1
        kinds[kind][1] += dur
        threads[e["tid"]] += 1
        opcode = opcodes.get(name, kind)
        if opcode.startswith(("all-reduce", "all-gather", "reduce-scatter", "collective", "all-to-all")):
            collectives[opcode] += 1
        first, last = min(first, e["ts"]), max(last, e["ts"] + e.get("dur", 0))
    total = sum(n for n, _ in loops.values())
    return {
        "trace": trace_file,
        "thunks": total,
        "thunk_ms": round(sum(ms for _, ms in loops.values()), 3),
        "span_ms": round((last - first) / 1e3, 3) if total else 0.0,
        "threads": sorted(threads.values(), reverse=True),
        "loops": [{"path": list(p), "thunks": n, "ms": round(ms, 3)}
                  for p, (n, ms) in sorted(loops.items(), key=lambda kv: -kv[1][0])[:top]],
        "kinds": [{"kind": k, "thunks": n, "ms": round(ms, 3)}
                  for k, (n, ms) in sorted(kinds.items(), key=lambda kv: -kv[1][0])[:top]],
        "collectives": dict(collectives),
    }


def _kind(thunk_name: str) -> str:
    """`broadcast_add_fusion.8` -> `broadcast_add_fusion`, `copy.75` -> `copy`."""
    return re.sub(r"\.\d+$", "", thunk_name)


def summary_markdown(summary: dict[str, Any]) -> str:
    """`summarize_trace`'s result as markdown tables."""
    lines = [f"{summary['thunks']:,} thunks, {summary['thunk_ms']:.1f} ms inside them over a "
             f"{summary['span_ms']:.1f} ms span; thunks per thread: {summary['threads']}", "",
             "| thunks | share | ms | enclosing loops (outermost first) |", "|---:|---:|---:|---|"]
    for loop in summary["loops"]:
        share = loop["thunks"] / max(summary["thunks"], 1)
        lines.append(f"| {loop['thunks']:,} | {share:.0%} | {loop['ms']:.1f} | "
                     f"{' / '.join(loop['path']) or '(top level)'} |")
    lines += ["", "| op kind | thunks | ms |", "|---|---:|---:|"]
    lines += [f"| {k['kind']} | {k['thunks']:,} | {k['ms']:.1f} |" for k in summary["kinds"]]
    if summary["collectives"]:
        lines += ["", "collectives: " + ", ".join(f"{k} x{v:,}" for k, v in summary["collectives"].items())]
    return "\n".join(lines)
