"""Smoke test of benchmarks.muzero: --quick, one thread, one simulation count (its Sebulba run, the
env-only ceiling and the pieces timed alone), writes the JSON.

Only checks that the point ran and produced positive numbers and shares that add up; no timing is asserted.
Also: the replay fields the benchmark gives MuZero pass its config check at every actor-thread count.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.muzero import replay_fields
from podrl.agents.muzero import MuZeroConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(400)
def test_quick_benchmark_writes_the_point(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.muzero", "--quick", "--threads", "1", "--simulations", "4",
                           "--num-envs", "8", "--rollout-length", "16", "--out", str(out)],
                          capture_output=True, text=True, timeout=380, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "bench_muzero" and doc["jax_version"] and doc["search"] == "gumbel"
    (row,) = doc["rows"]
    assert (row["threads"], row["num_simulations"], row["envs_per_thread"]) == (1, 4, 8)
    assert "error" not in row, row
    assert row["steps_per_second"] > 0 and row["ceiling_steps_per_second"] > 0 and row["compile_seconds"] > 0
    shares = row["actor_share_env"] + row["actor_share_search_inference"] + row["actor_share_handover_wait"]
    assert abs(shares - 1.0) < 1e-6 and row["actor_share_search_inference"] > 0, row
    split = row["actor_share_search_tree"] + row["actor_share_model_inference"]
    assert abs(split - row["actor_share_search_inference"]) < 1e-6 and row["actor_share_model_inference"] > 0, row
    assert row["learner_step_s"] > 0, row
    parts = row["parts"]  # the pieces timed alone: acting = tree + model, an update = replay + SGD
    assert parts["act_s"] > 0 and parts["inference_s"] > 0 and parts["replay_s"] > 0 and parts["update_s"] > 0, parts
    assert parts["tree_s"] == max(parts["act_s"] - parts["inference_s"], 0.0), parts
    assert parts["sgd_s"] == max(parts["update_s"] - parts["replay_s"], 0.0), parts
    assert parts["sgd_steps_per_update"] == 8, parts  # replay_ratio 0.0625 x 16 steps x 8 envs
    assert "| 1 | 4 |" in proc.stdout


@pytest.mark.parametrize("threads, envs", [(1, 16), (3, 16), (4, 16), (64, 16)])
def test_replay_fields_pass_the_config_check_for_every_thread_count(threads, envs):
    """4 threads x 16 envs on one learner once failed MuZero's min_fill check (640 needed, 512 given)."""
    fields = replay_fields(threads * envs)
    MuZeroConfig(**fields).check_batch(16, threads * envs)  # raises ConfigError on a bad pair
    assert fields["min_fill"] >= MuZeroConfig().min_fill and fields["buffer_size"] >= MuZeroConfig().buffer_size
