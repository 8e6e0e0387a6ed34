"""Many processes through jax.distributed on 127.0.0.1, started by `podrl launch` (podrl/cli/launch.py).

Every test here spawns real processes under a hard timeout.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from multihost_worker import anakin_config, population_config
from podrl.core.distributed import DistributedConfig, initialize
from podrl.core.errors import ConfigError
from tools.check_readme import doc_paths  # README.md and docs/*.md

ROOT = Path(__file__).resolve().parents[2]
PODRL = [sys.executable, "-m", "podrl"]
LAUNCH = PODRL + ["launch"]
WORKER = [sys.executable, str(ROOT / "tests" / "multihost_worker.py")]


def launch(num_processes: int, devices: int, command: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(LAUNCH + ["--num-processes", str(num_processes), "--devices-per-process", str(devices),
                                    "--"] + command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def load(path: Path) -> tuple[list[np.ndarray], int, int, float]:
    """`(param leaves, local env steps, global env steps, last eval return)` a worker saved."""
    data = np.load(path)
    leaves = [data[f"arr_{i}"] for i in range(sum(name.startswith("arr_") for name in data.files))]
    return leaves, int(data["local_steps"]), int(data["global_steps"]), float(data["final_eval"])


def spanning_compiles(path: Path) -> int:
    """How many programs spanning processes the worker compiled itself (`multihost_worker.count_spanning_compiles`)."""
    return int(np.load(path)["spanning_compiles"])


@pytest.mark.timeout(300)
def test_anakin_two_processes_match_one_process_with_four_devices(tmp_path, cpu_devices):
    result = launch(2, 2, WORKER + ["--layout", "anakin", "--out", str(tmp_path)], timeout=280)
    assert result.returncode == 0, result.stdout[-4000:]
    (p0, _, _, eval0), (p1, _, _, eval1) = load(tmp_path / "p0.npz"), load(tmp_path / "p1.npz")
    for a, b in zip(p0, p1, strict=True):
        np.testing.assert_array_equal(a, b)  # one program, one replicated result
    assert np.isfinite(eval0) and eval0 == eval1  # evaluation is one program over every process too
    assert "| eval " in result.stdout

    from podrl.agents.ppo import PPOConfig
    from podrl.anakin import train_anakin
    from podrl.run.config import LoggingConfig

    config = anakin_config(4, LoggingConfig(run_dir=None, console=False))
    single = train_anakin(dataclasses.replace(config, num_devices=4), PPOConfig())
    reference = [np.asarray(x)[0] for x in jax.tree.leaves(single.state.train_state.params)]
    for a, b in zip(p0, reference, strict=True):
        # Same global program; only the all-reduce differs (gloo across processes vs
        # in-process), which may sum in another order: float32 rounding, nothing more.
        np.testing.assert_allclose(a[0], b, atol=1e-5)


@pytest.mark.timeout(300)
def test_population_rows_span_two_processes_with_pbt(tmp_path, cpu_devices):
    """4 members (lr sweep, PBT every 2 updates) on a (2, 2) mesh over 2 processes x 2 devices: each
    process holds one row (2 members) and both take the same PBT decisions; the members equal those
    of the same population run in one process on 4 devices."""
    result = launch(2, 2, WORKER + ["--layout", "anakin", "--population", "--out", str(tmp_path)], timeout=280)
    assert result.returncode == 0, result.stdout[-4000:]
    assert "return best" in result.stdout
    (p0, _, _, eval0), (p1, _, _, eval1) = load(tmp_path / "p0.npz"), load(tmp_path / "p1.npz")
    assert eval0 == eval1

    from podrl.agents.ppo import PPOConfig
    from podrl.anakin import train_anakin
    from podrl.run.config import LoggingConfig

    config = population_config(4, LoggingConfig(run_dir=None, console=False))
    single = train_anakin(dataclasses.replace(config, num_devices=4), PPOConfig())
    assert any(r.get("pbt/replaced") for r in single.history)
    for row, leaves in ((0, p0), (1, p1)):
        for a, b in zip(leaves, jax.tree.leaves(single.state.train_state.params), strict=True):
            np.testing.assert_allclose(a, np.asarray(b)[2 * row:2 * row + 2], atol=1e-5)


@pytest.mark.timeout(400)
def test_anakin_muzero_two_processes_checkpoint_and_resume_consistently(tmp_path):
    """agent:muzero at its defaults (Gumbel search inside the rollout scan, one sequence replay per
    learner shard, 2 envs per shard): an uninterrupted 4-update run saves into one shared folder
    at updates 2 and 4 from both processes; with update 4's checkpoint deleted, a second pod resumes
    update 2's, restoring the same state (params, optimiser, target network and every shard's
    replay), and ends exactly where the uninterrupted run ended; the replay learned from update 2
    on (min_fill 512 = 2 updates of 2 envs x 128 steps), so updates 3-4 took gradient steps after
    the restore.

    Process 1 of both pods compiles no program that spans the processes (`podrl launch`'s
    --share-compiles): it looks in an empty cache folder of its own, so it loads each one from process
    0, which compiles it in the first pod and finds it in the suite's cache in the second."""
    import orbax.checkpoint as ocp

    whole, parts, shared = tmp_path / "whole", tmp_path / "parts", tmp_path / "ckpt"
    whole.mkdir(), parts.mkdir()
    base = WORKER + ["--layout", "anakin", "--agent", "muzero", "--updates", "4", "--no-eval",  # the state is compared
                     "--updates-per-call", "2", "--checkpoint-dir", str(shared),
                     "--others-cache", str(tmp_path / "process-1-cache")]
    result = launch(2, 2, base + ["--out", str(whole), "--checkpoint-every", "2"], timeout=180)
    assert result.returncode == 0, result.stdout[-4000:]
    manager = ocp.CheckpointManager(shared)
    assert list(manager.all_steps()) == [2, 4]
    manager.delete(4)
    manager.close()
    result = launch(2, 2, base + ["--out", str(parts), "--resume"], timeout=180)
    assert result.returncode == 0, result.stdout[-4000:]
    assert "updates 2..4 of 4" in result.stdout
    for name in ("p0.npz", "p1.npz"):
        for a, b in zip(load(whole / name)[0], load(parts / name)[0], strict=True):
            np.testing.assert_array_equal(a, b)
    (p0, *_), (p1, *_) = load(whole / "p0.npz"), load(whole / "p1.npz")
    assert int(p0[-1].reshape(-1)[0]) == int(p1[-1].reshape(-1)[0]) == 4 * 2 * 128  # each shard's replay size
    assert not np.array_equal(p0[-9], p1[-9])  # each process's shards hold its own envs' observations
    assert spanning_compiles(whole / "p1.npz") == spanning_compiles(parts / "p1.npz") == 0


@pytest.mark.timeout(300)
def test_sebulba_two_processes_share_one_learner(tmp_path):
    """Both processes end with the same params; each counts its own actors' steps, and their sum over the
    hosts is logged; process 0 alone logs and evaluates. `host_sum` (those sums) is exact in float64 past
    float32's 2^24: (2^24 + 1) + (2^24 + 2) on the two processes is 2^25 + 3 on both."""
    result = launch(2, 2, WORKER + ["--layout", "sebulba", "--out", str(tmp_path), "--updates", "6"], timeout=280)
    assert result.returncode == 0, result.stdout[-4000:]
    (p0, local0, global0, eval0), (p1, local1, global1, eval1) = load(tmp_path / "p0.npz"), load(tmp_path / "p1.npz")
    for a, b in zip(p0, p1, strict=True):
        np.testing.assert_array_equal(a, b)
    assert local0 == local1 == 8 * 64 * 6  # each host's own actor steps are counted (default 8 envs x 64)...
    assert global0 == global1 == 2 * 8 * 64 * 6  # ...and summed over hosts
    assert "[p0] [sebulba]" in result.stdout and "[p1] [sebulba]" not in result.stdout  # logs: process 0 only
    assert np.isfinite(eval0) and np.isnan(eval1)  # process 0 evaluates (on its own replica), alone
    assert "| eval " in result.stdout
    for name in ("p0.npz", "p1.npz"):
        summed = np.load(tmp_path / name)["host_sum"]
        assert summed.dtype == np.float64 and summed.tolist() == [2 ** 25 + 3], summed


@pytest.mark.timeout(400)
def test_sebulba_muzero_two_processes_share_one_learner(tmp_path):
    """agent:muzero at its defaults (Gumbel search in each host's actor threads, one sequence replay per
    learner shard): both processes end with the same params, and each learner shard's buffer holds the
    steps of its own host's actors."""
    result = launch(2, 2, WORKER + ["--layout", "sebulba", "--agent", "muzero", "--out", str(tmp_path),
                                    "--updates", "3"], timeout=380)
    assert result.returncode == 0, result.stdout[-4000:]
    (p0, local0, global0, eval0), (p1, local1, global1, eval1) = load(tmp_path / "p0.npz"), load(tmp_path / "p1.npz")
    buffer0, buffer1 = p0[-9:], p1[-9:]  # the ReplayBuffer's leaves: its 7 Step fields, position, size
    for a, b in zip(p0[:-9], p1[:-9], strict=True):
        np.testing.assert_array_equal(a, b)
    assert local0 == local1 == 8 * 64 * 3 and global0 == global1 == 2 * 8 * 64 * 3
    assert int(buffer0[-1].reshape(-1)[0]) == int(buffer1[-1].reshape(-1)[0]) == 8 * 64 * 3  # size: its host's steps
    assert not np.array_equal(buffer0[0], buffer1[0])  # observations: each host's own actors
    assert np.isfinite(eval0) and np.isnan(eval1)


@pytest.mark.timeout(400)
def test_sebulba_r2d2_two_processes_share_one_learner(tmp_path):
    """agent:r2d2 at its defaults (each host's actor thread acts with the Ape-X epsilons of its own global
    env columns, one prioritised sequence replay per learner shard, learning from the first update): both
    processes end with the same params; each learner shard's replay holds its own host's steps, and its
    priorities are its own; process p's actor states are made for env columns 8p .. 8p + 7 of 16."""
    result = launch(2, 2, WORKER + ["--layout", "sebulba", "--agent", "r2d2", "--out", str(tmp_path),
                                    "--updates", "3", "--record-columns"], timeout=380)
    assert result.returncode == 0, result.stdout[-4000:]
    (p0, local0, global0, _), (p1, local1, global1, _) = load(tmp_path / "p0.npz"), load(tmp_path / "p1.npz")
    # the PrioritisedReplay's leaves: 6 Step fields, position, size, the stored LSTM (c, h), sum tree, max priority
    replay0, replay1 = p0[-12:], p1[-12:]
    for a, b in zip(p0[:-12], p1[:-12], strict=True):
        np.testing.assert_array_equal(a, b)
    assert local0 == local1 == 8 * 64 * 3 and global0 == global1 == 2 * 8 * 64 * 3
    assert int(replay0[7].reshape(-1)[0]) == int(replay1[7].reshape(-1)[0]) == 8 * 64 * 3  # size: its host's steps
    assert not np.array_equal(replay0[0], replay1[0])  # observations: each host's own actors
    assert not np.array_equal(replay0[-2], replay1[-2])  # priorities: each shard's own draws
    for name, first in (("p0.npz", 0), ("p1.npz", 8)):  # each host's actors: its own 8 of the 16 env columns
        data = np.load(tmp_path / name)
        assert data["columns"].tolist() == list(range(first, first + 8)) and data["columns_total"].tolist() == [16]


def readme_launch_commands() -> dict[str, list[str]]:
    """The CPU-pod `podrl launch` commands of README.md and docs/*.md (continuation lines joined), by the
    training subcommand they launch (`... -- podrl anakin ...`); the supervisor demo (`--supervise`) has
    its own test (tests/system/test_preemption.py)."""
    text = "\n".join(page.read_text() for page in doc_paths()).replace("\\\n", " ")
    lines = [line.split() for line in text.splitlines()
             if line.startswith("podrl launch ") and "--supervise" not in line]
    return {words[words.index("--") + 2]: words for words in lines}


@pytest.mark.timeout(400)
@pytest.mark.parametrize("layout, total_steps", [
    ("anakin", 4 * 8 * 128),  # 4 updates of --num-envs 8 x 128 steps: one call
    ("sebulba", 4 * 8 * 64),  # 4 updates of 8 envs x 64 steps per host
])
def test_readme_multiprocess_command_runs_and_evaluates(tmp_path, layout, total_steps):
    """The README's CPU-pod command as written, defaults included (evaluation), only shorter."""
    words = readme_launch_commands()[layout]
    command = [part for w in words for part in (PODRL if w == "podrl" else [w])]
    command += ["--total-steps", str(total_steps), "--logging.run-dir", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=380, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(r"\[p0\] .*\| eval \d", result.stdout), result.stdout[-4000:]


@pytest.mark.parametrize("kwargs, field", [
    (dict(coordinator="127.0.0.1:1234", num_processes=2, process_id=2), "process_id"),
    (dict(coordinator="127.0.0.1:1234", num_processes=2, process_id=-1), "process_id"),
    (dict(coordinator="127.0.0.1:1234", num_processes=0, process_id=0), "num_processes"),
    (dict(coordinator="localhost", num_processes=2, process_id=0), "coordinator"),
    (dict(coordinator="127.0.0.1:1234", num_processes=2), "process_id"),
])
def test_bad_distributed_config_is_named(kwargs, field):
    with pytest.raises(ConfigError) as info:
        DistributedConfig(**kwargs)
    assert info.value.field == field


@pytest.mark.timeout(120)
def test_unreachable_coordinator_fails_fast(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train_anakin.py"), "--coordinator", f"127.0.0.1:{port}",
         "--num-processes", "2", "--process-id", "1", "--init-timeout-s", "3", "--logging.run-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=100, cwd=ROOT)
    assert result.returncode == 2
    assert f"coordinator: no coordinator answered at 127.0.0.1:{port}" in result.stderr
    assert time.monotonic() - start < 60


@pytest.mark.timeout(180)
def test_a_config_error_only_process_0_sees_stops_every_process(tmp_path):
    """Process 0 alone checks the run folder (only it writes one): when that folder is taken, process 0
    exits 2 naming the field and process 1 exits 2 too, at once, naming process 0, instead of training
    alone until a collective or JAX's heartbeat (100 s here) ends it. Started by hand, not by `podrl
    launch`, whose 30 s grace would hide a process left waiting."""
    from podrl.cli.launch import free_port

    (tmp_path / "runs" / "taken").mkdir(parents=True)
    (tmp_path / "runs" / "taken" / "config.json").write_text("{}")
    port = free_port("127.0.0.1")
    tiny = ["anakin", "--env", "MatchCue-v0", "--num-envs", "8", "--rollout-length", "16", "--total-steps", "2048",
            "--eval-every", "0", "--logging.run-dir", str(tmp_path / "runs"), "--logging.run-name", "taken",
            "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--cpu-devices", "1"]
    start = time.monotonic()
    procs = [subprocess.Popen(PODRL + tiny + ["--process-id", str(i)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=ROOT) for i in range(2)]
    try:
        outputs = [proc.communicate(timeout=150)[0] for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert [proc.returncode for proc in procs] == [2, 2], outputs
    assert "logging.run_name" in outputs[0] and "already holds a run" in outputs[0], outputs[0]
    assert "process 0 of this run could not start it" in outputs[1], outputs[1]
    assert time.monotonic() - start < 90  # the heartbeat (100 s) did not end it


def test_single_process_initialize_is_a_no_op():
    initialize(DistributedConfig())  # must not touch jax.distributed
    assert jax.process_count() == 1
