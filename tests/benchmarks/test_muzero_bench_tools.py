"""The MuZero benchmark pieces that run without a peer or a GPU: the 10M-step GPU command's dry run
(benchmarks.muzero_gpu) and the MinAtar MuZero row's curves (benchmarks.peer_programs)."""

import subprocess
import sys
from pathlib import Path

from benchmarks import peer_programs

ROOT = Path(__file__).resolve().parents[2]


def dry_run(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks.muzero_gpu", "--dry-run", *flags], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def test_muzero_gpu_dry_run_prints_the_3_seed_10m_command_and_checks_it():
    proc = dry_run()
    assert proc.returncode == 0, proc.stderr[-2000:]
    command = proc.stdout.splitlines()[0]
    assert command.startswith("python -m podrl reproduce minatar-muzero --env gymnax:Breakout-MinAtar --seeds 3 "
                              "--total-steps 10000000 --out docs/results/minatar-muzero-1e7"), command
    assert " -- --num-envs 1024 --agent.buffer-size " in command
    assert "checked: 1024 envs x 8 steps" in proc.stdout and "3 seeds x 10,000,000 steps per game" in proc.stdout
    # no envs: the scaled buffer is empty; refused by the training command's parser, naming the field
    proc = dry_run("--num-envs", "0")
    assert proc.returncode != 0 and "buffer_size" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "checked:" not in proc.stdout


def test_muzero_row_reports_return_against_env_steps_and_seconds_for_both_sides():
    row = peer_programs.quick(peer_programs.ROWS["minatar-muzero"])
    assert row.peer_spec["total_timesteps"] == row.podrl_spec["total_steps"] == 2048
    assert row.peer_spec["evaluations"] == row.podrl_spec["evaluations"] == 2
    runs = [[{"env_steps": 512, "train_seconds": s, "train_return": r, "eval_return": 0.5},
             {"env_steps": 1024, "train_seconds": 2 * s, "train_return": r + 1, "eval_return": None}]
            for s, r in ((10.0, 0.2), (30.0, 0.4), (20.0, 0.3))]
    curve = peer_programs.median_curve(runs)
    assert curve == [{"env_steps": 512, "train_seconds": 20.0, "train_return": 0.3, "eval_return": 0.5},
                     {"env_steps": 1024, "train_seconds": 40.0, "train_return": 1.3, "eval_return": None}]
    assert peer_programs.median_curve([]) is None
    entry = {"peer_name": "stoix", "peer": {"curve": curve}, "podrl": {"curve": curve[:1]}}
    lines = peer_programs.curve_table(entry).splitlines()
    assert "stoix train s" in lines[0] and "podrl eval" in lines[0]
    assert lines[2].split("|")[1:-1] == [" 512 ", " 20 ", " 0.30 ", " 0.50 ", " 20 ", " 0.30 ", " 0.50 "]
    assert lines[3].split("|")[1:-1] == [" 1,024 ", " 40 ", " 1.30 ", " n/a ", " n/a ", " n/a ", " n/a "]
