"""Evaluate the greedy policy of a checkpoint.

Examples:
  python scripts/evaluate.py runs/CartPole-v1__anakin__seed0__20250101-120000      # its env, 32 episodes
  python scripts/evaluate.py runs/r/checkpoints --step 64 --episodes 100 --json
  python scripts/evaluate.py runs/r --env jax:CartPole-v1        # the JAX env stepped on the host
  python scripts/evaluate.py runs/r --env CartPole-v1 --backend host --video videos/   # gymnasium's own

Loads the checkpoint's config (layout, run, agent) and only its "params" item
(no training state), rebuilds the agent (`podrl.policy`), and runs `--episodes`
greedy episodes:

* on a JAX env (`podrl.evaluation.evaluate_greedy`, reset keys
  `jax.random.split(jax.random.key(seed), episodes)`), or
* on a host vector env of `episodes` envs (`envs.adapters.make.make_host_env`,
  `podrl.evaluation.evaluate_host_greedy`, reset with `seed`).

`--env` defaults to the checkpoint's env. `--backend auto` tries a name first the
way the checkpoint's layout does (Anakin: `envs.make`; Sebulba: `make_host_env`),
then the other way; `jax` / `host` force one. Anakin params hold one set per seed
(`[S, ...]`); `--seed-index` picks one. A missing or unreadable checkpoint exits
with status 2 and a message naming the path.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Annotated, Any, Literal

import numpy as np
import tyro

from podrl.policy import (PolicyError, check_spec, experiment_of, load_policy, open_checkpoint, resolve_env,
                          run_episodes, trained_spec)


@dataclasses.dataclass(frozen=True)
class EvaluateArgs:
    """Evaluate the greedy policy of a checkpoint."""

    checkpoint: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="CHECKPOINT_DIR")]
    """A checkpoint folder, or a run folder holding checkpoints/."""
    step: int | None = None
    """Checkpoint step to load; None = the latest."""
    env: str | None = None
    """Env to evaluate on: a JAX env name or any make_host_env name; None = the checkpoint's env."""
    backend: Literal["auto", "jax", "host"] = "auto"
    """How to build --env: auto (the checkpoint layout's way first), jax (envs.make) or host (make_host_env)."""
    episodes: int = 32
    """Greedy episodes to run."""
    seed: int = 0
    """Seed of the evaluation env resets."""
    seed_index: int = 0
    """Which training seed (or population member) of an Anakin run (params are [num_seeds or population, ...])."""
    max_steps: int | None = None
    """Step bound of one episode; None = the checkpoint's eval_max_steps."""
    video: str | None = None
    """Record one episode into this folder (gymnasium envs that render rgb_array)."""
    json: bool = False
    """Print one JSON object instead of the text line."""


def evaluate(args: EvaluateArgs) -> dict[str, Any]:
    """Runs the evaluation; returns the JSON-able summary."""
    if args.episodes < 1:
        raise PolicyError(f"--episodes must be positive, got {args.episodes}")
    checkpointer, step, config = open_checkpoint(args.checkpoint, args.step)
    try:
        layout, run = config["layout"], config["run"]
        options = dict(experiment_of(config, checkpointer.directory).env_options)  # e.g. the run's Atari protocol
        own_backend = "jax" if layout == "anakin" else "host"
        own = resolve_env(run["env"], own_backend, layout, options) if not args.env else None
        env = own or resolve_env(args.env, args.backend, layout)
        trained = own.spec if own else trained_spec(run["env"], layout, env, options)
        check_spec(trained, env)
        agent, params = load_policy(config, checkpointer, step, trained, args.seed_index)
    finally:
        checkpointer.close()
    max_steps = args.max_steps or int(run.get("eval_max_steps") or 1000)
    result = run_episodes(agent, params, env, args.episodes, args.seed, max_steps)
    returns = np.asarray(result.returns, np.float64)
    summary = {
        "checkpoint": checkpointer.directory, "step": step, "layout": layout, "env": env.name,
        "backend": env.backend, "seed_index": args.seed_index, "episodes": int(returns.size),
        "mean": float(returns.mean()), "std": float(returns.std()), "min": float(returns.min()),
        "max": float(returns.max()), "finished": int(np.sum(result.finished)), "max_steps": max_steps,
        "returns": returns.tolist(),
    }
    if args.video:
        from podrl.video import try_video

        summary["video"] = try_video(agent, params, env, args.video, args.seed, max_steps)
    return summary


def _quiet_orbax() -> None:
    """Hides orbax's absl warnings about read-only managers (they are expected here)."""
    try:
        from absl import logging as absl_logging
    except ImportError:
        return
    absl_logging.set_verbosity(absl_logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(EvaluateArgs, args=argv)
    _quiet_orbax()
    try:
        summary = evaluate(args)
    except PolicyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if "video" in summary:
        print(summary["video"], file=sys.stderr)
    if args.json:
        print(json.dumps(summary))
    else:
        unfinished = summary["episodes"] - summary["finished"]
        print(f"{summary['env']} ({summary['backend']}), checkpoint step {summary['step']}: greedy return "
              f"{summary['mean']:.2f} ± {summary['std']:.2f} over {summary['episodes']} episodes"
              + (f" ({unfinished} cut at {summary['max_steps']} steps)" if unfinished else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
