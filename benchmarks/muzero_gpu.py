"""The 10M-step MinAtar MuZero run for a GPU machine: 3 seeds of `--preset minatar-muzero`, 1,024 envs.

One `podrl reproduce` command (an Anakin program of 3 seeds per game, the report written beside
the CPU one): the preset's recipe with its envs scaled from 64 to `--num-envs` (1,024: Anakin
MuZero ran ~40k steps/s on an H200 with that many) and its replay buffer and `min_fill` scaled with
them, so each env keeps the same steps of history; the replay ratio (gradient steps per env step)
and batch are the preset's, so the learner's work per env step is the CPU run's.

    python -m benchmarks.muzero_gpu                         # on the GPU machine (JAX with CUDA)
    python -m benchmarks.muzero_gpu --dry-run               # anywhere: the command, its flags parsed and the
                                                            # configs built and checked by `podrl anakin`'s
                                                            # own parser (nothing is compiled or trained)
    python -m benchmarks.muzero_gpu --env gymnax:SpaceInvaders-MinAtar --stop-after-s 1500
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from typing import Any

from benchmarks.harness import ROOT

PRESET = "minatar-muzero"
CPU_ENVS = 64
"""The preset's envs: the buffer and min_fill of the preset are per these many envs."""


def training_flags(num_envs: int) -> list[str]:
    """The training command's overrides of the preset for `num_envs` envs (after `--` of reproduce)."""
    from podrl.cli.presets import PRESETS

    agent = PRESETS[PRESET].agent_fields
    scale = num_envs / CPU_ENVS
    return ["--num-envs", str(num_envs), "--agent.buffer-size", str(int(agent["buffer_size"] * scale)),
            "--agent.min-fill", str(int(agent["min_fill"] * scale)), "--eval-every", "64"]


def command(args: argparse.Namespace) -> list[str]:
    """The `podrl reproduce` command line."""
    return [sys.executable, "-m", "podrl", "reproduce", PRESET, *(x for env in args.env for x in ("--env", env)),
            "--seeds", str(args.seeds), "--total-steps", str(args.total_steps), "--out", args.out,
            "--stop-after-s", str(args.stop_after_s), "--", *training_flags(args.num_envs)]


def check(args: argparse.Namespace) -> Any:
    """The experiment `podrl anakin` would build from the preset and these flags, checked
    (`check_batch` of the agent against the envs per shard): a `UserInputError` names a bad field."""
    from podrl.cli.train import run_cli

    built = {}

    def check_only(experiment):
        run = experiment.run
        experiment.agent.check_batch(run.rollout_length, run.num_envs // (run.num_devices or 1))
        built["experiment"] = experiment
        return 0

    for env in args.env:
        argv = ["--preset", PRESET, "--env", env, "--num-seeds", str(args.seeds), "--total-steps",
                str(args.total_steps), *training_flags(args.num_envs), "--num-devices", "1"]
        code = run_cli("anakin", train_fn=check_only, argv=argv)
        if code:
            raise SystemExit(code)
    return built["experiment"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", action="append", default=None, help="games (repeat); default Breakout-MinAtar")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--total-steps", type=int, default=10_000_000)
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--stop-after-s", type=float, default=3000.0, help="each game's wall-clock cap")
    parser.add_argument("--out", default="docs/results/minatar-muzero-1e7")
    parser.add_argument("--dry-run", action="store_true", help="print the command, check its configs; run nothing")
    args = parser.parse_args(argv)
    args.env = args.env or ["gymnax:Breakout-MinAtar"]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cmd = command(args)
    print(shlex.join(["python", *cmd[1:]]))
    experiment = check(args)
    run, agent = experiment.run, experiment.agent
    steps = agent.sgd_steps(run.rollout_length, run.num_envs)
    print(f"checked: {run.num_envs} envs x {run.rollout_length} steps, {steps} "
          f"gradient steps of {agent.batch_size} windows per update, buffer {agent.buffer_size:,} env steps, "
          f"{args.seeds} seeds x {args.total_steps:,} steps per game")
    if args.dry_run:
        return 0
    return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
