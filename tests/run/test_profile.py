"""`--profile DIR` writes a jax.profiler trace of a training call (Anakin and Sebulba)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script, flags, calls", [
    ("train_anakin.py", ["--total-steps", "4096", "--updates-per-call", "4", "--num-devices", "1"], "1..1"),
    ("train_sebulba.py", ["--total-steps", "2048", "--cpu-devices", "1"], "1..3"),  # 4 updates; 3 traced
])
def test_profile_writes_a_trace_of_a_training_call(tmp_path, script, flags, calls):
    done = subprocess.run([sys.executable, f"scripts/{script}", *flags, "--profile", str(tmp_path / "trace"),
                           "--logging.run-dir", "None", "--eval-episodes", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    traces = list((tmp_path / "trace").glob("plugins/profile/*/*.trace.json.gz"))
    assert len(traces) == 1 and traces[0].stat().st_size > 1000
    assert f"profile of training call(s) {calls} written to" in done.stdout + done.stderr


def test_profile_summary_names_the_loops_by_source_line(tmp_path):
    trace = tmp_path / "trace"
    done = subprocess.run([sys.executable, "scripts/train_anakin.py", "--total-steps", "4096",
                           "--updates-per-call", "2",
                           "--num-envs", "4", "--rollout-length", "64", "--num-devices", "1", "--profile", str(trace),
                           "--logging.run-dir", "None", "--eval-episodes", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (trace / "train_call.hlo.txt").exists()
    out = subprocess.run([sys.executable, "-m", "podrl", "profile-summary", str(trace), "--json",
                          str(tmp_path / "s.json"), "--top", "50"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["thunks"] > 1000
    paths = [" / ".join(loop["path"]) for loop in summary["loops"]]
    rollout = sum(loop["thunks"] for loop, p in zip(summary["loops"], paths) if "podrl/anakin/rollout.py" in p)
    update = sum(loop["thunks"] for loop, p in zip(summary["loops"], paths) if "agents/ppo/agent.py" in p)
    assert rollout > 0 and update > 0, paths
    assert "podrl/anakin/rollout.py" in out.stdout


def test_thunk_paths_follow_nested_loops_and_branches():
    import jax
    import jax.numpy as jnp

    from podrl.run.profiling import loop_labels, thunk_paths

    def f(x, flag):
        def inner(c, _):
            return jnp.tanh(c) * 1.5, None

        def outer(c, _):
            c = jax.lax.scan(inner, c, None, 3)[0]
            return jax.lax.cond(flag, lambda v: v * 2.0, lambda v: v - 1.0, c), None

        return jax.lax.scan(outer, x, None, 4)[0]

    text = jax.jit(f).lower(jnp.ones(3), True).compile().as_text()
    paths, labels = thunk_paths(text), loop_labels(text)
    # XLA:CPU may wrap a loop in a call carrying the same metadata; the summary merges them by label
    nests = {tuple(dict.fromkeys(labels[op] for op in p)) for p in paths.values()}
    line = "tests/run/test_profile.py:"
    loops = [n for n in nests if n and all(line in part and part.endswith("while)") for part in n)]
    assert max(map(len, loops)) == 2  # the inner scan's thunks sit inside both loops
    inner = next(n for n in loops if len(n) == 2)
    assert inner[0] != inner[1]
    branches = [n for n in nests if len(n) == 2 and n[0] == inner[0] and n[1].endswith("cond)")]
    assert branches, nests  # the cond's thunks sit in the outer loop only
