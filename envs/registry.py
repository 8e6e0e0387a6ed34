"""`envs.make`: JAX environments by name (ours, gymnax's, Craftax's), or a user's env class by import path."""

from __future__ import annotations

import importlib
from typing import Any, Callable, NamedTuple

from envs.types import JaxEnv
from envs.wrappers import TimeLimit
from envs.errors import UserInputError


class _Entry(NamedTuple):
    module: str
    attr: str
    max_episode_steps: int | None


_REGISTRY: dict[str, _Entry] = {
    "CartPole-v1": _Entry("envs.cartpole", "CartPole", 500),
    "Acrobot-v1": _Entry("envs.acrobot", "Acrobot", 500),
    "Pendulum-v1": _Entry("envs.pendulum", "Pendulum", 200),
    "MatchSign-v0": _Entry("envs.tiny", "MatchSign", None),
    "MatchCue-v0": _Entry("envs.tiny", "MatchCue", None),
    "ReachCue-v0": _Entry("envs.tiny", "ReachCue", None),
    "RecallCue-v0": _Entry("envs.tiny", "RecallCue", None),
}


class UnknownEnvError(UserInputError, ValueError):
    """Raised for an env name that is neither registered nor an import path (or whose import fails)."""

    label = "unknown env"


def registered() -> list[str]:
    """Names accepted by `make` besides `module:attr` import paths."""
    return sorted(_REGISTRY)


def _import(path: str) -> Callable[..., Any]:
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UnknownEnvError(f"env {path!r}: cannot import module {module_name!r} ({e})") from e
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UnknownEnvError(f"env {path!r}: module {module_name!r} has no attribute {attr!r}") from None


def _suite(name: str) -> Any:
    """`envs.gymnax` if `name` is a 'gymnax:' / 'craftax:' name, else None (imported lazily: it imports this)."""
    from envs import gymnax

    return gymnax if gymnax.is_suite_name(name) else None


def check_name(name: str) -> None:
    """Raises UnknownEnvError unless `make(name)` can resolve `name` (cheap, nothing compiled)."""
    if name in _REGISTRY:
        return
    if (suite := _suite(name)) is not None:
        suite.check_name(name)
        return
    if ":" not in name:
        raise UnknownEnvError(
            f"unknown env {name!r}: expected one of {registered()}, 'gymnax:<id>', 'craftax:<id>' "
            "or 'module:ClassOrFactory'"
        )
    _import(name)


def make(name: str, **kwargs: Any) -> JaxEnv:
    """Builds a JAX env.

    Args:
      name: a registered id (`registered()`), wrapped in gymnasium's time limit;
        `"gymnax:<id>"` / `"craftax:<id>"` (`envs.gymnax`; `kwargs` override env
        params); or `"package.module:Factory"` for a user's env class or factory, called
        with `kwargs` and returned as is (add `envs.TimeLimit` yourself).
    """
    if (suite := _suite(name)) is not None:
        return suite.make(name, **kwargs)
    if name in _REGISTRY:
        entry = _REGISTRY[name]
        env = getattr(importlib.import_module(entry.module), entry.attr)(**kwargs)
        if entry.max_episode_steps is not None:
            env = TimeLimit(env, entry.max_episode_steps)
        return env
    check_name(name)
    env = _import(name)(**kwargs)
    missing = [m for m in ("reset", "step", "observation_spec", "action_spec") if not callable(getattr(env, m, None))]
    if missing:
        raise UnknownEnvError(f"env {name!r} is not a JaxEnv: missing method(s) {missing}")
    return env
