"""`podrl evaluate`: the greedy policy of a checkpoint.

Examples:
  podrl evaluate runs/CartPole-v1__anakin__seed0__20250101-120000      # its env, 32 episodes
  podrl evaluate runs/r/checkpoints --step 64 --episodes 100 --json
  podrl evaluate runs/r --env jax:CartPole-v1        # the JAX env stepped on the host
  podrl evaluate runs/r --env CartPole-v1 --backend host --video videos/   # gymnasium's own

Loads the checkpoint's config (layout, run, agent) and only its "params" item
(no training state), rebuilds the agent (`podrl.cli.policy`), and runs `--episodes`
greedy episodes:

* on a JAX env (`podrl.run.evaluation.evaluate_greedy`, reset keys
  `jax.random.split(jax.random.key(seed), episodes)`), or
* on a host vector env of `episodes` envs (`podrl.envs.adapters.make.make_host_env`,
  `podrl.run.evaluation.evaluate_host_greedy`, reset with `seed`).

`--env` defaults to the checkpoint's env. `--backend auto` tries a name first the
way the checkpoint's layout does (Anakin: `podrl.envs.make`; Sebulba: `make_host_env`),
then the other way; `jax` / `host` force one. Anakin params hold one set per seed
(`[S, ...]`); `--seed-index` picks one. A missing or unreadable checkpoint exits
with status 2 and a message naming the path (`--debug` or `PODRL_DEBUG=1` adds the traceback). A run
of your own agent is rebuilt from the class and module its folder names: run it from the folder
that holds that module (or with it on PYTHONPATH).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback
from typing import Annotated, Any, Literal

import numpy as np
import tyro

from podrl.cli.flags import DEBUG_HELP
from podrl.cli.policy import (
    PolicyError,
    check_spec,
    experiment_of,
    load_policy,
    open_checkpoint,
    resolve_env,
    run_episodes,
    trained_spec,
)
from podrl.cli.train import debug_requested
from podrl.cli.video import try_video
from podrl.core.errors import UserInputError
from podrl.core.finite import check_evaluation


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
    """How to build --env: auto (the checkpoint layout's way first), jax (podrl.envs.make) or host (make_host_env)."""
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


def evaluate_checkpoint(checkpoint: str, step: int | None = None, env: str | None = None, backend: str = "auto",
                        episodes: int = 32, seed: int = 0, seed_index: int = 0, max_steps: int | None = None,
                        video: str | None = None) -> dict[str, Any]:
    """Greedy episodes of the policy in `checkpoint` (`EvaluateArgs` describes each argument);
    returns the JSON-able summary (mean, std, min, max, returns, ...)."""
    if episodes < 1:
        raise PolicyError(f"--episodes must be positive, got {episodes}")
    checkpointer, step, config = open_checkpoint(checkpoint, step)
    try:
        layout, run = config["layout"], config["run"]
        options = dict(experiment_of(config, checkpointer.directory).env_options)  # e.g. the run's Atari protocol
        own = resolve_env(run["env"], "jax" if layout == "anakin" else "host", layout, options) if not env else None
        evaluated = own or resolve_env(env, backend, layout)
        trained = own.spec if own else trained_spec(run["env"], layout, evaluated, options)
        check_spec(trained, evaluated)
        agent, params = load_policy(config, checkpointer, step, trained, seed_index)
    finally:
        checkpointer.close()
    max_steps = max_steps or int(run.get("eval_max_steps") or 1000)
    result = run_episodes(agent, params, evaluated, episodes, seed, max_steps)
    # a NaN/Inf reward or observation, or an observation without a legal action: the env's fault, said as in training
    check_evaluation(np.sum(result.bad_reward), np.sum(result.bad_observation), episodes, step,
                     np.sum(result.no_legal), evaluated.name)
    returns = np.asarray(result.returns, np.float64)
    summary = {
        "checkpoint": checkpointer.directory, "step": step, "layout": layout, "env": evaluated.name,
        "backend": evaluated.backend, "seed_index": seed_index, "episodes": int(returns.size),
        "mean": float(returns.mean()), "std": float(returns.std()), "min": float(returns.min()),
        "max": float(returns.max()), "finished": int(np.sum(result.finished)), "max_steps": max_steps,
        "returns": returns.tolist(),
    }
    if video:
        summary["video"] = try_video(agent, params, evaluated, video, seed, max_steps)
    return summary


def evaluate(args: EvaluateArgs) -> dict[str, Any]:
    """Runs the evaluation (`evaluate_checkpoint`); returns the JSON-able summary."""
    options = {f.name: getattr(args, f.name) for f in dataclasses.fields(args) if f.name != "json"}
    return evaluate_checkpoint(**options)


def _quiet_orbax() -> None:
    """Hides orbax's absl warnings about read-only managers (they are expected here)."""
    try:
        from absl import logging as absl_logging
    except ImportError:
        return
    absl_logging.set_verbosity(absl_logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    debug, argv = debug_requested(sys.argv[1:] if argv is None else argv)
    args = tyro.cli(EvaluateArgs, args=argv, description=f"Evaluate the greedy policy of a checkpoint.\n\n{DEBUG_HELP}")
    _quiet_orbax()
    try:
        summary = evaluate(args)
    except (PolicyError, UserInputError) as e:  # UserInputError: the env's NaN or no legal action
        if debug:
            traceback.print_exception(e)
        print(f"error: {e}" + ("" if debug else "\n(add --debug or set PODRL_DEBUG=1 for the traceback)"),
              file=sys.stderr)
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
