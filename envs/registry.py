"""`podrl.envs.make`: JAX environments by name (ours, gymnax's, Craftax's, Brax's), or a user's env class by import
path.

The names it takes are the Anakin column of `podrl.envs.schemes`: a `scheme:` name goes to its row's
module (`podrl.envs.gymnax`, `podrl.envs.brax`); a registered id and a `module:attr` path are built here.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import re
import sys
from typing import Any, Callable, NamedTuple

from podrl.envs import schemes
from podrl.envs.errors import UnknownEnvError
from podrl.envs.types import JaxEnv
from podrl.envs.wrappers import TimeLimit

__all__ = ["ImportPathError", "UnknownEnvError", "check_name", "import_path", "import_user_module", "make",
           "registered"]


class _Entry(NamedTuple):
    module: str
    attr: str
    max_episode_steps: int | None


_REGISTRY: dict[str, _Entry] = {
    "CartPole-v1": _Entry("podrl.envs.cartpole", "CartPole", 500),
    "Acrobot-v1": _Entry("podrl.envs.acrobot", "Acrobot", 500),
    "Pendulum-v1": _Entry("podrl.envs.pendulum", "Pendulum", 200),
    "MatchSign-v0": _Entry("podrl.envs.tiny", "MatchSign", None),
    "MatchCue-v0": _Entry("podrl.envs.tiny", "MatchCue", None),
    "ReachCue-v0": _Entry("podrl.envs.tiny", "ReachCue", None),
    "RecallCue-v0": _Entry("podrl.envs.tiny", "RecallCue", None),
    "DictCue-v0": _Entry("podrl.envs.tiny", "DictCue", None),
    "MaskedCue-v0": _Entry("podrl.envs.tiny", "MaskedCue", None),
}


def registered() -> list[str]:
    """Names accepted by `make` besides `module:attr` import paths."""
    return sorted(_REGISTRY)


def import_user_module(module_name: str) -> Any:
    """Imports the module of a user's `module:attr` env, the current folder importable as `python -m`
    makes it (so `--env my_envs:Chain` finds `./my_envs.py`, in this process and in spawned workers)."""
    _importable_cwd()
    return importlib.import_module(module_name)


class ImportPathError(ImportError):
    """A `module:attr` path that names nothing: its module does not import, or lacks the attribute.
    The message is one clause (`cannot import module 'm' (...)`, `module 'm' has no attribute 'a'`)
    that each caller puts in its own sentence (an env, an agent)."""


def import_path(path: str) -> Any:
    """The object a `module:attr` path names (`--env my_envs:Chain`, `agent:my_agents:A2CConfig`): `module`
    imported as `import_user_module` does (the current folder first, as `python -m` makes it), then its
    attribute `attr`. Raises `ImportPathError` (module doc)."""
    module_name, _, attr = path.partition(":")
    try:
        module = import_user_module(module_name)
    except ImportError as e:
        raise ImportPathError(f"cannot import module {module_name!r} ({e})") from e
    if not attr or not hasattr(module, attr):
        raise ImportPathError(f"module {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)


def _importable_cwd() -> None:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def renamed_env(name: str) -> str | None:
    """The name of today for an env that names one of podrl's own modules by its path from before
    podrl's envs/ installed as `podrl.envs` (`envs.tiny:MatchSign` -> `podrl.envs.tiny:MatchSign`,
    `dm_env:envs.x:make` -> `dm_env:podrl.envs.x:make`); None for any other name, and for a user's
    own importable `envs.<module>` (from the current folder, as `--env` resolves it)."""
    match = re.fullmatch(r"(\w+:)?envs\.([\w.]+)(:.+)", name)
    if match is None:
        return None
    prefix, module, attr = match.groups()
    ours = _origin(f"podrl.envs.{module}")
    if ours is None:
        return None
    _importable_cwd()
    theirs = _origin(f"envs.{module}")  # podrl's own folder when run from its checkout: the same file
    return f"{prefix or ''}podrl.envs.{module}{attr}" if theirs in (None, ours) else None


def _origin(module: str) -> str | None:
    """The real path of `module`'s file, or None when it cannot be found."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return os.path.realpath(spec.origin) if spec is not None and spec.origin else None


def _import(path: str) -> Callable[..., Any]:
    try:
        return import_path(path)
    except ImportPathError as e:
        expected = f"; expected {schemes.expected('anakin')}" if e.__cause__ is not None else ""
        raise UnknownEnvError(f"env {path!r}: {e}{expected}") from e.__cause__


def close_names(name: str, names: Any, quote: Callable[[str], str] = repr) -> str:
    """" (did you mean 'A' or 'B'?)" for the entries of `names` closest to `name` (difflib), or ""."""
    close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.75)
    if not close:
        return ""
    return " (did you mean " + " or ".join(quote(n) for n in close) + "?)"


def _gymnasium_hint(name: str) -> str:
    """"; 'X' is a gymnasium id, which the sebulba layout steps" when it is one, else ""."""
    try:
        import gymnasium
    except ImportError:  # pragma: no cover - a dependency of podrl
        return ""
    if name in gymnasium.registry:
        return f"; {name!r} is a gymnasium id, which the sebulba layout steps on the host"
    return ""


def check_name(name: str) -> None:
    """Raises UnknownEnvError unless `make(name)` can resolve `name` (cheap, nothing compiled); an unknown
    id's error names the registered ids closest to it."""
    if (suite := schemes.builder(name, "anakin")) is not None:
        suite.check_name(name)
        return
    if name in _REGISTRY:
        return
    if ":" not in name:
        raise UnknownEnvError(f"unknown env {name!r}{close_names(name, registered())}: expected "
                              f"{schemes.expected('anakin')} (JAX env ids: {registered()}){_gymnasium_hint(name)}")
    _import(name)


def make(name: str, **kwargs: Any) -> JaxEnv:
    """Builds a JAX env.

    Args:
      name: a registered id (`registered()`), wrapped in gymnasium's time limit; a `scheme:` name
        the Anakin layout takes (`podrl.envs.schemes`: `"gymnax:<id>"`, `"craftax:<id>"`,
        `"brax:<env>"`; `kwargs` override env params, brax's backend and options likewise); or
        `"package.module:Factory"` for a user's env class or factory, called with `kwargs` and
        returned as is (add `envs.TimeLimit` yourself).
    """
    if (suite := schemes.builder(name, "anakin")) is not None:
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
