"""A trained policy from a checkpoint: open it, rebuild the agent from its saved config,
restore one seed's params, and run greedy episodes on a JAX or host env.

    checkpointer, step, config = open_checkpoint("runs/r", step=None)
    env = resolve_env(config["run"]["env"], "auto", config["layout"])
    agent, params = load_policy(config, checkpointer, step, env.spec, seed_index=0)
    result = run_episodes(agent, params, env, episodes=32, seed=0, max_steps=1000)

The agent is found through the registry (`podrl.agents.AGENTS`, by the saved
`agent_type`); nothing here names a specific agent. Problems a user can fix
(bad path, corrupted checkpoint, wrong env) raise `PolicyError` with a one-line message.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import jax
import numpy as np

import podrl.envs
from podrl.cli.experiment import saved_agent, saved_experiment
from podrl.core.errors import ConfigError
from podrl.envs.observations import describe as describe_observation
from podrl.envs.registry import UnknownEnvError
from podrl.envs.types import EnvSpec
from podrl.run.checkpoint_folder import resume_dir
from podrl.run.evaluation import evaluate_greedy, evaluate_host_greedy


class PolicyError(Exception):
    """A problem the user can fix: a bad path, a corrupted checkpoint, an env that doesn't fit."""


# ---------------------------------------------------------------- checkpoint


def open_checkpoint(path: str, step: int | None):
    """`(Checkpointer, step, saved config)` of `path` (a checkpoint or run folder); step None = the latest."""
    if not os.path.isdir(path):  # before importing orbax: a typo fails fast
        raise PolicyError(f"no checkpoint folder at {path!r}")
    from podrl.run.checkpoint import Checkpointer  # orbax: only once the folder exists

    directory = resume_dir(path)
    try:
        checkpointer = Checkpointer(directory, read_only=True)
        steps = list(checkpointer.manager.all_steps())
    except Exception as e:  # noqa: BLE001 - orbax raises many kinds
        raise PolicyError(f"cannot open checkpoints in {directory!r}: {describe_error(e)}") from e
    if not steps:
        raise PolicyError(f"no complete checkpoint in {directory!r}")
    step = max(steps) if step is None else step
    if step not in steps:
        raise PolicyError(f"no checkpoint step {step} in {directory!r} (steps: {sorted(steps)})")
    try:
        config = checkpointer.read_config(step)
    except Exception as e:  # noqa: BLE001
        raise PolicyError(f"cannot read the config of step {step} in {directory!r} (corrupted?): "
                          f"{describe_error(e)}") from e
    for key in ("layout", "run", "agent_type", "agent"):
        if key not in config:
            raise PolicyError(f"the config of step {step} in {directory!r} has no {key!r} entry")
    return checkpointer, step, config


def experiment_of(config: dict[str, Any], where: str):
    """The `podrl.cli.experiment.Experiment` a checkpoint's saved `config` describes (its parsed env options,
    its agent); PolicyError when this version cannot rebuild it."""
    try:
        return saved_experiment(config, where)
    except ConfigError as e:
        raise PolicyError(f"the config saved in {where!r} does not build here: {e}") from e


def agent_config_from(config: dict[str, Any], where: str):
    """The agent config saved in a checkpoint's `config` (`podrl.cli.experiment.saved_agent`, as a resume
    rebuilds it); PolicyError when this version cannot rebuild it, a warning for fields it does not know."""
    try:
        agent_config, ignored = saved_agent(config, where)
    except (TypeError, ValueError) as e:  # ConfigError is a ValueError
        raise PolicyError(f"the checkpoint's {config['agent_type']} is invalid here: {e}") from e
    if ignored:
        print(f"warning: ignoring agent fields this version does not know: {ignored}", file=sys.stderr)
    return agent_config


def load_policy(config: dict[str, Any], checkpointer, step: int, trained_spec: Any, seed_index: int):
    """`(agent, params)`: the agent rebuilt from `config`, params of one seed on the default device.

    Anakin params hold one set per training seed (`[S, ...]`); `seed_index` picks one.
    """
    agent = agent_config_from(config, checkpointer.directory).make_agent(trained_spec, 1)
    key = jax.random.key(0)  # only shapes matter: the values come from the checkpoint
    if config["layout"] == "anakin":
        num_seeds = int(config["run"].get("population") or config["run"].get("num_seeds", 1))  # or members
        if not 0 <= seed_index < num_seeds:
            raise PolicyError(f"--seed-index {seed_index} is out of range: the run trained {num_seeds} seed(s)")
        # lax.map, not vmap: a batched QR (orthogonal init) can deadlock jaxlib 0.10.2's CPU pool
        like = jax.lax.map(lambda k: agent.init(k, trained_spec).params, jax.random.split(key, num_seeds))
        params = _restore_params(checkpointer, step, like)
        return agent, jax.tree.map(lambda x: x[seed_index], params)
    return agent, _restore_params(checkpointer, step, agent.init(key, trained_spec).params)


def _restore_params(checkpointer, step: int, like: Any) -> Any:
    try:
        return checkpointer.restore_params(like, step)
    except Exception as e:  # noqa: BLE001 - tensorstore/orbax errors are long and varied
        raise PolicyError(f"cannot restore the params of step {step} in {checkpointer.directory!r} "
                          f"(corrupted or written by another agent/env?): {describe_error(e)}") from e


def _first_line(error: BaseException) -> str:
    text = str(error).split(" See full TensorStore details")[0].split(" [tensorstore_spec")[0].strip()
    return text.splitlines()[0][:500] if text else repr(error)


def describe_error(error: BaseException) -> str:
    """The error and its root cause, one line each (orbax wraps tensorstore's precise message)."""
    root = error
    while root.__cause__ is not None:
        root = root.__cause__
    text = f"{type(error).__name__}: {_first_line(error)}"
    return text if root is error else f"{text} (cause: {type(root).__name__}: {_first_line(root)})"


# ---------------------------------------------------------------- environments


@dataclasses.dataclass
class EvalEnv:
    """An env to evaluate on: a JAX env, or a host env name (built with one env per episode)."""

    name: str
    backend: str  # "jax" or "host"
    spec: Any  # envs.EnvSpec of one env
    jax_env: Any = None
    options: dict[str, Any] = dataclasses.field(default_factory=dict)  # host env options (a run's env_kwargs)


def _jax_env(name: str, options: dict[str, Any]) -> EvalEnv:
    del options  # JAX envs take none (only Sebulba runs have env_kwargs)
    env = podrl.envs.make(name)
    return EvalEnv(name, "jax", podrl.envs.env_spec(env), jax_env=env)


def _host_env(name: str, options: dict[str, Any]) -> EvalEnv:
    from podrl.envs.adapters.make import make_host_env
    env = make_host_env(name, 1, **options)
    try:
        return EvalEnv(name, "host", EnvSpec(env.observation_spec(), env.action_spec()), options=options)
    finally:
        env.close()


def resolve_env(name: str, backend: str, layout: str, options: dict[str, Any] | None = None) -> EvalEnv:
    """Builds `name` with `backend` ("jax", "host"); "auto" tries the layout's way first, then the other.

    `options` go to a host env (a Sebulba run's `env_kwargs`, e.g. its Atari protocol)."""
    order = {"jax": [_jax_env], "host": [_host_env]}.get(backend)
    if order is None:
        order = [_jax_env, _host_env] if layout == "anakin" else [_host_env, _jax_env]
    errors = []
    for build in order:
        try:
            return build(name, options or {})
        except (UnknownEnvError, ImportError, TypeError, ValueError) as e:
            errors.append(f"{build.__name__.strip('_')}: {e}")
    raise PolicyError(f"cannot build env {name!r}: " + "; ".join(errors))


def trained_spec(name: str, layout: str, fallback: EvalEnv, options: dict[str, Any] | None = None):
    """The spec of the env the checkpoint was trained on (the eval env's if that one cannot be built)."""
    try:
        return resolve_env(name, "jax" if layout == "anakin" else "host", layout, options).spec
    except PolicyError as e:
        print(f"warning: {e}; assuming it matches {fallback.name!r}", file=sys.stderr)
        return fallback.spec


def check_spec(trained: Any, evaluated: EvalEnv) -> None:
    """Raises PolicyError if the eval env's observations/actions do not fit the trained params."""
    def describe(spec) -> str:
        action = spec.action
        actions = (f"{action.num_values} discrete actions" if hasattr(action, "num_values")
                   else f"actions of shape {tuple(action.shape)} ({np.dtype(action.dtype).name})")
        return f"observation {describe_observation(spec.observation)} and {actions}"

    if describe(trained) != describe(evaluated.spec):
        raise PolicyError(f"env {evaluated.name!r} has {describe(evaluated.spec)}; the checkpoint was "
                          f"trained with {describe(trained)}")


def run_episodes(agent, params, env: EvalEnv, episodes: int, seed: int, max_steps: int):
    """`EvalResult` of `episodes` greedy episodes (one per env).

    JAX env: reset keys `split(key(seed), episodes)`; host env: `episodes` envs reset with `seed`.
    """
    if env.backend == "jax":
        keys = jax.random.split(jax.random.key(seed), episodes)
        return jax.jit(lambda p, k: evaluate_greedy(agent, env.jax_env, p, k, max_steps))(params, keys)
    from podrl.envs.adapters.make import make_host_env

    host = make_host_env(env.name, episodes, seed=seed, **env.options)
    try:
        return evaluate_host_greedy(agent, params, host, seed=seed, max_steps=max_steps)
    finally:
        host.close()
