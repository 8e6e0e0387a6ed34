"""Evaluate the greedy policy of a checkpoint.

Examples:
  python scripts/evaluate.py runs/CartPole-v1__anakin__seed0__20250101-120000      # its env, 32 episodes
  python scripts/evaluate.py runs/r/checkpoints --step 64 --episodes 100 --json
  python scripts/evaluate.py runs/r --env jax:CartPole-v1        # the JAX env stepped on the host
  python scripts/evaluate.py runs/r --env CartPole-v1 --backend host --video videos/   # gymnasium's own

Loads the checkpoint's config (layout, run, agent) and only its "params" item
(no training state), rebuilds the agent, and runs `--episodes` greedy episodes:

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
import os
import sys
from typing import Annotated, Any, Callable, Literal

import numpy as np
import tyro


class EvaluateError(Exception):
    """A problem the user can fix (bad path, corrupted checkpoint, wrong env); exits with status 2."""


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
    """Which training seed of an Anakin run (params are [num_seeds, ...])."""
    max_steps: int | None = None
    """Step bound of one episode; None = the checkpoint's eval_max_steps."""
    video: str | None = None
    """Record one episode into this folder (gymnasium envs that render rgb_array)."""
    json: bool = False
    """Print one JSON object instead of the text line."""


# ---------------------------------------------------------------- checkpoint


def open_checkpoint(path: str, step: int | None):
    """`(Checkpointer, step, saved config)` of `path`; EvaluateError naming the path otherwise."""
    if not os.path.isdir(path):  # before importing JAX: a typo fails fast
        raise EvaluateError(f"no checkpoint folder at {path!r}")
    from podrl.checkpoint import Checkpointer, resume_dir

    directory = resume_dir(path)
    try:
        checkpointer = Checkpointer(directory, read_only=True)
        steps = list(checkpointer.manager.all_steps())
    except Exception as e:  # noqa: BLE001 - orbax raises many kinds
        raise EvaluateError(f"cannot open checkpoints in {directory!r}: {_describe(e)}") from e
    if not steps:
        raise EvaluateError(f"no complete checkpoint in {directory!r}")
    step = max(steps) if step is None else step
    if step not in steps:
        raise EvaluateError(f"no checkpoint step {step} in {directory!r} (steps: {sorted(steps)})")
    try:
        config = checkpointer.read_config(step)
    except Exception as e:  # noqa: BLE001
        raise EvaluateError(f"cannot read the config of step {step} in {directory!r} (corrupted?): "
                            f"{_describe(e)}") from e
    for key in ("layout", "run", "agent_type", "agent"):
        if key not in config:
            raise EvaluateError(f"the config of step {step} in {directory!r} has no {key!r} entry")
    return checkpointer, step, config


def agent_config_from(config: dict[str, Any]):
    """The agent config saved in a checkpoint (JSON lists back to tuples)."""
    from agents.impala import ImpalaConfig
    from agents.ppo import PPOConfig

    types = {"PPOConfig": PPOConfig, "ImpalaConfig": ImpalaConfig}
    cls = types.get(config["agent_type"])
    if cls is None:
        raise EvaluateError(f"unknown agent_type {config['agent_type']!r}; expected one of {sorted(types)}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(config["agent"]) - names)
    if unknown:
        print(f"warning: ignoring agent fields this version does not know: {unknown}", file=sys.stderr)
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in config["agent"].items() if k in names}
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:  # ConfigError is a ValueError
        raise EvaluateError(f"the checkpoint's {cls.__name__} is invalid here: {e}") from e


def restore_params(checkpointer, step: int, like: Any) -> Any:
    try:
        return checkpointer.restore_params(like, step)
    except Exception as e:  # noqa: BLE001 - tensorstore/orbax errors are long and varied
        raise EvaluateError(f"cannot restore the params of step {step} in {checkpointer.directory!r} "
                            f"(corrupted or written by another agent/env?): {_describe(e)}") from e


def _first_line(error: BaseException) -> str:
    text = str(error).split(" See full TensorStore details")[0].split(" [tensorstore_spec")[0].strip()
    return text.splitlines()[0][:500] if text else repr(error)


def _describe(error: BaseException) -> str:
    """The error and its root cause, one line each (orbax wraps tensorstore's precise message)."""
    root = error
    while root.__cause__ is not None:
        root = root.__cause__
    text = f"{type(error).__name__}: {_first_line(error)}"
    return text if root is error else f"{text} (cause: {type(root).__name__}: {_first_line(root)})"


# ---------------------------------------------------------------- environments


@dataclasses.dataclass
class EvalEnv:
    """An env to evaluate on: a JAX env, or a host env name (built with `episodes` envs)."""

    name: str
    backend: str  # "jax" or "host"
    spec: Any  # envs.EnvSpec of one env
    jax_env: Any = None


def _jax_env(name: str) -> EvalEnv:
    import envs

    env = envs.make(name)
    return EvalEnv(name, "jax", envs.env_spec(env), jax_env=env)


def _host_env(name: str) -> EvalEnv:
    from envs.adapters.make import make_host_env
    from envs.types import EnvSpec

    env = make_host_env(name, 1)
    try:
        return EvalEnv(name, "host", EnvSpec(env.observation_spec(), env.action_spec()))
    finally:
        env.close()


def resolve_env(name: str, backend: str, layout: str) -> EvalEnv:
    """Builds `name` with `backend`; "auto" tries the layout's way first, then the other."""
    from envs.registry import UnknownEnvError

    order = {"jax": [_jax_env], "host": [_host_env]}.get(backend)
    if order is None:
        order = [_jax_env, _host_env] if layout == "anakin" else [_host_env, _jax_env]
    errors = []
    for build in order:
        try:
            return build(name)
        except (UnknownEnvError, ImportError, TypeError, ValueError) as e:
            errors.append(f"{build.__name__.strip('_')}: {e}")
    raise EvaluateError(f"cannot build env {name!r}: " + "; ".join(errors))


def _trained_spec(name: str, layout: str, fallback: EvalEnv):
    """The spec of the env the checkpoint was trained on (the eval env's if that one cannot be built)."""
    try:
        return resolve_env(name, "jax" if layout == "anakin" else "host", layout).spec
    except EvaluateError as e:
        print(f"warning: {e}; assuming it matches {fallback.name!r}", file=sys.stderr)
        return fallback.spec


def check_spec(trained: Any, evaluated: EvalEnv) -> None:
    """Raises EvaluateError if the eval env's observations/actions do not fit the trained params."""
    def describe(spec) -> str:
        action = spec.action
        actions = (f"{action.num_values} discrete actions" if hasattr(action, "num_values")
                   else f"actions of shape {tuple(action.shape)} ({np.dtype(action.dtype).name})")
        return f"observation shape {tuple(spec.observation.shape)} and {actions}"

    if describe(trained) != describe(evaluated.spec):
        raise EvaluateError(f"env {evaluated.name!r} has {describe(evaluated.spec)}; the checkpoint was "
                            f"trained with {describe(trained)}")


# ---------------------------------------------------------------- evaluation


def load_policy(config: dict[str, Any], checkpointer, step: int, trained_spec: Any, seed_index: int):
    """`(agent, params)`: the agent rebuilt from the config, params of one seed on the default device."""
    import jax

    agent = agent_config_from(config).make_agent(trained_spec, 1)
    key = jax.random.key(0)
    if config["layout"] == "anakin":  # params [num_seeds, ...]
        num_seeds = int(config["run"].get("num_seeds", 1))
        if not 0 <= seed_index < num_seeds:
            raise EvaluateError(f"--seed-index {seed_index} is out of range: the run trained {num_seeds} seed(s)")
        like = jax.vmap(lambda k: agent.init(k, trained_spec).params)(jax.random.split(key, num_seeds))
        params = restore_params(checkpointer, step, like)
        return agent, jax.tree.map(lambda x: x[seed_index], params)
    like = agent.init(key, trained_spec).params
    return agent, restore_params(checkpointer, step, like)


def run_episodes(agent, params, env: EvalEnv, episodes: int, seed: int, max_steps: int):
    """`EvalResult` of `episodes` greedy episodes (one per env)."""
    import jax

    from podrl.evaluation import evaluate_greedy, evaluate_host_greedy

    if env.backend == "jax":
        keys = jax.random.split(jax.random.key(seed), episodes)
        return jax.jit(lambda p, k: evaluate_greedy(agent, env.jax_env, p, k, max_steps))(params, keys)
    from envs.adapters.make import make_host_env

    host = make_host_env(env.name, episodes, seed=seed)
    try:
        return evaluate_host_greedy(agent, params, host, seed=seed, max_steps=max_steps)
    finally:
        host.close()


# ---------------------------------------------------------------- video


def gymnasium_id(name: str) -> str | None:
    """The gymnasium id behind an env name ('CartPole-v1', 'jax:CartPole-v1'), or None."""
    import gymnasium

    for candidate in (name, name.removeprefix("jax:")):
        if candidate in gymnasium.registry:
            return candidate
    return None


def record_video(agent, params, make_env: Callable[[], Any], directory: str, seed: int, max_steps: int) -> str:
    """Plays one greedy episode in `make_env()` (render_mode="rgb_array") and saves it under `directory`.

    mp4 via gymnasium's RecordVideo when moviepy is installed; otherwise a GIF
    (PIL) or PNG frames (matplotlib). Returns a message saying what was written;
    raises EvaluateError when nothing could be.
    """
    import importlib.util

    os.makedirs(directory, exist_ok=True)
    env = make_env()
    if getattr(env, "render_mode", None) != "rgb_array":
        env.close()
        raise EvaluateError(f"the env renders {getattr(env, 'render_mode', None)!r}, not 'rgb_array'")
    if importlib.util.find_spec("moviepy") is not None:
        from gymnasium.wrappers import RecordVideo

        env = RecordVideo(env, directory, episode_trigger=lambda _: True, name_prefix="eval")
        _play(agent, params, env, seed, max_steps, frames=None)
        env.close()
        return f"video: wrote an mp4 to {directory}"
    frames: list[np.ndarray] = []
    _play(agent, params, env, seed, max_steps, frames)
    env.close()
    return save_frames(frames, directory)


def _play(agent, params, env, seed: int, max_steps: int, frames: list | None) -> None:
    import jax

    act = jax.jit(agent.act_greedy)
    actor_state = agent.init_actor_state(1)
    obs, _ = env.reset(seed=seed)
    for _ in range(max_steps):
        if frames is not None:
            frames.append(np.asarray(env.render()))
        obs = np.asarray(obs)
        obs = obs.astype(np.float32) if np.issubdtype(obs.dtype, np.floating) else obs
        action, actor_state = act(params, actor_state, obs[None])
        action = np.asarray(action)[0]
        obs, _, terminated, truncated, _ = env.step(action.item() if action.ndim == 0 else action)
        if terminated or truncated:
            break
    if frames is not None:
        frames.append(np.asarray(env.render()))


def save_frames(frames: list[np.ndarray], directory: str) -> str:
    """Saves frames as `eval.gif` (PIL) or `frame_00000.png`... (matplotlib); a message says which."""
    import importlib.util

    if not frames:
        raise EvaluateError("the episode produced no frames")
    if importlib.util.find_spec("PIL") is not None:
        from PIL import Image

        path = os.path.join(directory, "eval.gif")
        images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=40, loop=0)
        return f"video: moviepy is not installed; wrote a GIF of {len(frames)} frames to {path}"
    if importlib.util.find_spec("matplotlib") is not None:
        import matplotlib.pyplot as plt

        for i, frame in enumerate(frames):
            plt.imsave(os.path.join(directory, f"frame_{i:05d}.png"), np.asarray(frame, np.uint8))
        return f"video: moviepy and PIL are not installed; wrote {len(frames)} PNG frames to {directory}"
    raise EvaluateError("none of moviepy, PIL or matplotlib is installed (pip install moviepy)")


def try_video(agent, params, env: EvalEnv, directory: str, seed: int, max_steps: int) -> str:
    """`record_video` for a gymnasium env name; any failure becomes a message (never raises).

    A JAX env with a gymnasium twin (CartPole-v1, Acrobot-v1, Pendulum-v1: same
    dynamics) is recorded in gymnasium's version, which can render.
    """
    gym_id = gymnasium_id(env.name)
    if gym_id is None:
        return f"video: skipped, {env.name!r} is not a gymnasium env (only those render rgb_array frames)"
    try:
        import gymnasium

        return record_video(agent, params, lambda: gymnasium.make(gym_id, render_mode="rgb_array"),
                            directory, seed, max_steps)
    except Exception as e:  # noqa: BLE001 - a video is a bonus, never a reason to fail
        return f"video: skipped, recording {gym_id!r} failed: {_describe(e)}"


# ---------------------------------------------------------------- main


def evaluate(args: EvaluateArgs) -> dict[str, Any]:
    """Runs the evaluation; returns the JSON-able summary."""
    if args.episodes < 1:
        raise EvaluateError(f"--episodes must be positive, got {args.episodes}")
    checkpointer, step, config = open_checkpoint(args.checkpoint, args.step)
    try:
        layout, run = config["layout"], config["run"]
        own = resolve_env(run["env"], "jax" if layout == "anakin" else "host", layout) if not args.env else None
        env = own or resolve_env(args.env, args.backend, layout)
        trained = own.spec if own else _trained_spec(run["env"], layout, env)
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
    sys.path.insert(0, os.getcwd())  # `--env my_pkg.my_env:MyEnv` resolves from the working directory
    args = tyro.cli(EvaluateArgs, args=argv)
    _quiet_orbax()
    try:
        summary = evaluate(args)
    except EvaluateError as e:
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
