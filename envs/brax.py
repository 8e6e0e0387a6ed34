"""Brax environments as podrl `JaxEnv`s: `brax:<env>`, for the Anakin layout.

Names (a row of `podrl.envs.schemes`: accepted by `podrl.envs.make`, `podrl.envs.registry.check_name`
and, stepped on the host for Sebulba, by `podrl.envs.adapters.make_host_env` as they are or after `jax:`)::

    brax:inverted_pendulum                        the default backend (DEFAULT_BACKEND)
    brax:ant,backend=generalized                  a backend: generalized, positional, spring, mjx
    brax:halfcheetah,episode_length=500           the time limit (default 1000, brax's training default)

Other `field=value` items are keyword arguments of the brax env's constructor (e.g.
`brax:ant,ctrl_cost_weight=0.1`), values Python literals. An unknown env or backend is an
`UnknownEnvError` naming it, before anything compiles.

Termination vs truncation. `BraxEnv` wraps the *raw* brax env (`brax.envs.get_environment`),
none of brax's training wrappers: its `state.done` is a termination (discount 0), and the
time limit is our `envs.TimeLimit` (a LAST step with discount 1 and `extras["truncated"]`,
which the agents bootstrap), as brax's `EpisodeWrapper` does with `state.info["truncation"]`.
An env that already reports `info["truncation"]` (one a user built with brax's
`EpisodeWrapper`) keeps it: a truncated step is LAST with discount 1, its done is not a
termination. Auto-reset is `envs.AutoReset` (the layouts'), which draws a fresh initial
state from a new key at every episode end; brax's `AutoResetWrapper` instead restores the
env's first state, the same one for all episodes of an env slot.

Actions: float32 `[action_size]` in [-1, 1] (brax's actuators' range; clipped here, as the
Gaussian policies' samples are unbounded). Observations: float32 `[observation_size]`.

Backend default: `positional` (see docs/environments.md for the figures measured on the
shared 2-core CPU: `spring` steps ~3x faster but is the least accurate; `generalized`
is brax's most accurate and slowest; `mjx` is MuJoCo's JAX engine).
"""

from __future__ import annotations

import difflib
from typing import Any

import jax.numpy as jnp
import numpy as np
from dm_env import specs

from podrl.envs.errors import UnknownEnvError
from podrl.envs.gymnax import parse_name
from podrl.envs.types import ActionSpec, Array, ObservationSpec, PRNGKey, TimeStep, ending, restart
from podrl.envs.wrappers import TimeLimit

BACKENDS = ("generalized", "positional", "spring", "mjx")
DEFAULT_BACKEND = "positional"
"""The backend of a name that gives none (module docstring)."""
DEFAULT_EPISODE_LENGTH = 1000
"""Brax's training default episode length (`brax.training.agents.ppo.train(episode_length=1000)` in its examples)."""


class BraxEnv:
    """A raw brax env (no wrappers) as a podrl `JaxEnv`; state: brax's `State` pytree.

    No time limit and no auto-reset: `make` adds `envs.TimeLimit`, the layouts
    `podrl.envs.wrap_for_training`. Every timestep's extras hold "truncated" (bool `[]`).
    """

    shard_map_check_vma = False
    """Brax's pipelines start loop carries from constants, and under vmapped seeds some state leaves
    trip shard_map's varying-value check (as gymnax's do, `podrl.envs.gymnax`): Anakin maps them with it off."""

    def __init__(self, env: Any, name: str):
        self.env, self.name = env, name
        self._observation_spec = specs.Array((int(env.observation_size),), np.float32, name="observation")
        size = (int(env.action_size),)
        self._action_spec = specs.BoundedArray(size, np.float32, -np.ones(size, np.float32),
                                               np.ones(size, np.float32), name="action")

    def reset(self, key: PRNGKey) -> tuple[Any, TimeStep]:
        state = self.env.reset(key)
        return state, restart(state.obs.astype(jnp.float32), {"truncated": jnp.asarray(False)})

    def step(self, state: Any, action: Array) -> tuple[Any, TimeStep]:
        state = self.env.step(state, jnp.clip(action, -1.0, 1.0))
        truncation = (getattr(state, "info", None) or {}).get("truncation")  # only under brax's EpisodeWrapper
        truncated = jnp.asarray(False) if truncation is None else truncation > 0.5
        return state, ending(state.obs.astype(jnp.float32), state.reward, (state.done > 0.5) & ~truncated, truncated)

    def observation_spec(self) -> ObservationSpec:
        return self._observation_spec

    def action_spec(self) -> ActionSpec:
        return self._action_spec


def _import_brax_envs():
    from podrl.envs.adapters.optional import import_optional

    return import_optional("brax.envs", "brax", "brax", "brax>=0.12")


def _quote_words(name: str) -> str:
    """`name` with bare-word values quoted (`backend=spring` -> `backend='spring'`), so they parse
    as Python literals; other values stay as they are."""
    head, *items = name.split(",")
    quoted = []
    for item in items:
        field, sep, text = item.partition("=")
        word = text.strip()
        quoted.append(f"{field}={word!r}" if sep and word.isidentifier() and word not in ("True", "False", "None")
                      else item)
    return ",".join([head, *quoted])


def _options(name: str, overrides: dict[str, Any]) -> tuple[str, str, int, dict[str, Any]]:
    """`(env id, backend, episode_length, constructor kwargs)` of `name`; UnknownEnvError naming a bad one."""
    _, env_id, from_name = parse_name(_quote_words(name))
    options = {**from_name, **overrides}
    backend = options.pop("backend", DEFAULT_BACKEND)
    if backend not in BACKENDS:
        raise UnknownEnvError(f"env {name!r}: backend {backend!r} is not one of {BACKENDS}")
    length = options.pop("episode_length", DEFAULT_EPISODE_LENGTH)
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise UnknownEnvError(f"env {name!r}: episode_length must be a positive int, got {length!r}")
    return env_id, backend, length, options


def _build(name: str, overrides: dict[str, Any]) -> tuple[Any, int]:
    env_id, backend, length, kwargs = _options(name, overrides)
    brax_envs = _import_brax_envs()
    ids = sorted(brax_envs._envs)  # brax's registry (brax.envs.register_environment fills it)
    if env_id not in ids:
        close = difflib.get_close_matches(env_id, ids, n=3)
        hint = f"did you mean {close}? " if close else ""
        raise UnknownEnvError(f"unknown env {name!r}: {env_id!r} is not a brax env; {hint}brax envs: {ids}")
    try:
        env = brax_envs.get_environment(env_id, backend=backend, **kwargs)
    except TypeError as e:  # an unknown constructor keyword
        raise UnknownEnvError(f"env {name!r}: brax's {env_id} does not take these options {sorted(kwargs)} "
                              f"({e})") from e
    return env, length


def check_name(name: str) -> None:
    """Raises UnknownEnvError (or MissingExtraError) unless `make(name)` can build `name`; compiles nothing."""
    env_id, _, _, _ = _options(name, {})
    ids = sorted(_import_brax_envs()._envs)
    if env_id not in ids:
        _build(name, {})  # raises with the suggestions


def make(name: str, **overrides: Any) -> TimeLimit:
    """`TimeLimit(BraxEnv(...), episode_length)` for a 'brax:<env>[,field=value...]' name (module doc)."""
    env, length = _build(name, overrides)
    return TimeLimit(BraxEnv(env, name), length)

