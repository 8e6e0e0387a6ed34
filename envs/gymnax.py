"""gymnax and Craftax environments as podrl `JaxEnv`s: `gymnax:<id>` and `craftax:<id>`.

Names (rows of `podrl.envs.schemes`: accepted by `podrl.envs.make`, `podrl.envs.registry.check_name`
and, for Sebulba, by `podrl.envs.adapters.make_host_env` as they are or after `jax:`)::

    gymnax:Breakout-MinAtar                      any id in gymnax.registered_envs
    craftax:Craftax-Classic-Symbolic-v1          Craftax-{Classic-,}{Symbolic,Pixels}-v1
    gymnax:Breakout-MinAtar,max_steps_in_episode=500    env params overridden

Both suites follow the gymnax API (`reset_env(key, params)`,
`step_env(key, state, action, params)`, `default_params`). `GymnaxEnv` calls
those, never gymnax's auto-resetting `step`: `podrl.envs.wrap_for_training` auto-resets.
The PRNG key gymnax's `step_env` takes travels in the env state
(`GymnaxState.key`), so `step(state, action)` takes no key.

Termination vs truncation. `step_env`'s done flag becomes discount 0 (termination)
only. The time limit is lifted out of the env params (gymnax's
`max_steps_in_episode`, Craftax's `max_timesteps`) and applied by `envs.TimeLimit`,
which ends the episode at that many steps with a LAST step of discount 1 and
`extras["truncated"] = True`:

* gymnax >= 1.0 keeps its time limit out of `step_env` (it reports it separately
  with `is_truncated`: `state.time >= max_steps_in_episode`, `time` counting steps
  from 0 in every built-in env), so its params stay as they are;
* Craftax folds `timestep >= max_timesteps` into `step_env`'s done
  (`is_game_over`), so the params the env sees get `max_timesteps` = 2**31 - 1,
  out of reach, and only `TimeLimit` ends episodes on time.

Env params: the suite's `default_params`, with overrides given as `field=value`
items after the id (comma separated, values Python literals) or as keyword
arguments of `podrl.envs.make(name, **overrides)`; an unknown field or a value of the
wrong type is an `UnknownEnvError` naming the field. Overriding the time-limit
field moves the `TimeLimit`.

Inside `shard_map` with its varying-value check (`check_vma`), some suite code fails
to trace: a `scan`/`while_loop` whose carry starts from a constant and comes out
varying over the mesh (gymnax Asterix-MinAtar; Craftax's renderer and world generator).
`GymnaxEnv.shard_map_check_vma` is therefore False, and the Anakin layout maps these
envs' programs with the check off (JAX's own advice for such code; the layout's
gradient and metric reductions are explicit `pmean`/`psum`s, the same either way).

Observations keep the env's dtype (gymnax MinAtar: float32 0/1 `[10, 10, C]`,
channels last; Craftax-Classic symbolic: float32 `[1345]`), so no torso scales them
as uint8 pixels.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
from types import ModuleType
from typing import Any, Callable, NamedTuple

import jax
import numpy as np
from dm_env import specs

from podrl.envs.errors import UnknownEnvError
from podrl.envs.types import ActionSpec, Array, EnvState, ObservationSpec, PRNGKey, TimeStep, restart, transition
from podrl.envs.wrappers import TimeLimit

UNREACHABLE_STEPS = int(np.iinfo(np.int32).max)
"""The time limit a suite that folds it into `done` gets in its params (TimeLimit applies the real one)."""

CRAFTAX_IDS = ("Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1", "Craftax-Symbolic-v1", "Craftax-Pixels-v1")


class Suite(NamedTuple):
    """A library of gymnax-API envs: how to import it, list its ids, build one, find its time limit."""

    module: str  # the import name
    package: str  # the pip requirement
    extra: str  # podrl's pip extra
    time_limit_field: str  # the env params field holding the episode step limit
    folds_time_limit: bool  # step_env's done includes the time limit (so it is put out of reach)
    ids: Callable[[ModuleType], list[str]]
    build: Callable[[ModuleType, str], Any]  # (module, id) -> env without auto-reset


def _craftax_env(module: ModuleType, env_id: str) -> Any:
    from craftax.craftax_env import make_craftax_env_from_name

    return make_craftax_env_from_name(env_id, auto_reset=False)


SUITES: dict[str, Suite] = {
    "gymnax": Suite("gymnax", "gymnax>=1.0", "gymnax", "max_steps_in_episode", False,
                    lambda m: list(m.registered_envs), lambda m, env_id: m.make(env_id)[0]),
    "craftax": Suite("craftax", "craftax>=1.5", "craftax", "max_timesteps", True,
                     lambda m: list(CRAFTAX_IDS), _craftax_env),
}


class GymnaxState(NamedTuple):
    inner: EnvState  # the suite's own env state
    key: PRNGKey  # split at every step for step_env's randomness


class GymnaxEnv:
    """A gymnax-API env (`reset_env` / `step_env`) with fixed `params` as a podrl `JaxEnv`.

    No time limit and no auto-reset: `make` adds `envs.TimeLimit`, the layouts
    `podrl.envs.wrap_for_training`. Observations `[*obs_shape]` in the env's dtype;
    actions int32 `[]` (Discrete) or float32 `[*action_shape]` (Box).
    """

    shard_map_check_vma = False
    """Suite code may start loop carries from constants, which shard_map's varying-value check rejects."""

    def __init__(self, env: Any, params: Any, name: str):
        self.env, self.params, self.name = env, params, name
        obs = jax.eval_shape(lambda key: env.reset_env(key, params)[0], jax.random.key(0))
        self._observation_spec = _observation_spec(env.observation_space(params), obs, name)
        self._action_spec = _action_spec(env.action_space(params), name)

    def reset(self, key: PRNGKey) -> tuple[GymnaxState, TimeStep]:
        key, reset_key = jax.random.split(key)
        obs, inner = self.env.reset_env(reset_key, self.params)
        return GymnaxState(inner, key), restart(obs)

    def step(self, state: GymnaxState, action: Array) -> tuple[GymnaxState, TimeStep]:
        key, step_key = jax.random.split(state.key)
        obs, inner, reward, done, _ = self.env.step_env(step_key, state.inner, action, self.params)
        return GymnaxState(inner, key), transition(obs, reward, done)

    def observation_spec(self) -> ObservationSpec:
        return self._observation_spec

    def action_spec(self) -> ActionSpec:
        return self._action_spec


def _observation_spec(space: Any, obs: jax.ShapeDtypeStruct, name: str) -> ObservationSpec:
    """The spec of one observation: shape and dtype as reset returns them, bounds from a Box space."""
    if not hasattr(space, "low"):
        raise UnknownEnvError(f"env {name!r}: observation space {type(space).__name__} is not supported "
                              "(only array observations, a Box space)")
    try:
        return specs.BoundedArray(obs.shape, obs.dtype, np.asarray(space.low), np.asarray(space.high),
                                  name="observation")
    except ValueError:  # bounds that do not broadcast to the shape or fit the dtype
        return specs.Array(obs.shape, obs.dtype, name="observation")


def _action_spec(space: Any, name: str) -> ActionSpec:
    """Discrete(n) -> DiscreteArray(n) int32; Box -> float32 BoundedArray."""
    if hasattr(space, "n"):
        return specs.DiscreteArray(int(space.n), dtype=np.int32, name="action")
    if hasattr(space, "low"):
        shape = tuple(space.shape)
        low, high = (np.broadcast_to(np.asarray(b, np.float32), shape) for b in (space.low, space.high))
        return specs.BoundedArray(shape, np.float32, low, high, name="action")
    raise UnknownEnvError(f"env {name!r}: action space {type(space).__name__} is not supported (Discrete or Box)")


# ---------------------------------------------------------------- names and params


def parse_name(name: str) -> tuple[str, str, dict[str, Any]]:
    """`'gymnax:Breakout-MinAtar,max_steps_in_episode=500'` -> `('gymnax', 'Breakout-MinAtar', {...: 500})`."""
    prefix, _, rest = name.partition(":")
    env_id, *items = rest.split(",")
    overrides: dict[str, Any] = {}
    for item in items:
        field, sep, text = item.partition("=")
        if not sep or not field.strip():
            raise UnknownEnvError(f"env {name!r}: expected '{prefix}:<id>,field=value,...', got item {item!r}")
        try:
            overrides[field.strip()] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            raise UnknownEnvError(f"env {name!r}: env param {field.strip()!r}: {text!r} is not a Python "
                                  "literal (a number, True/False, a tuple)") from None
    return prefix, env_id.strip(), overrides


def _import_suite(suite: Suite) -> ModuleType:
    from podrl.envs.adapters.optional import import_optional

    return import_optional(suite.module, suite.module, suite.extra, suite.package)


def _build(name: str, overrides: dict[str, Any]) -> tuple[Suite, Any, Any]:
    """(suite, env, params with `overrides`) for `name`; UnknownEnvError before anything compiles."""
    prefix, env_id, from_name = parse_name(name)
    suite = SUITES[prefix]
    module = _import_suite(suite)
    ids = suite.ids(module)
    if env_id not in ids:
        close = difflib.get_close_matches(env_id, ids, n=3)
        hint = f"did you mean {close}? " if close else ""
        raise UnknownEnvError(f"unknown env {name!r}: {env_id!r} is not a {prefix} env; "
                              f"{hint}{prefix} ids: {sorted(ids)}")
    env = suite.build(module, env_id)
    params = override_params(env.default_params, {**from_name, **overrides}, name)
    return suite, env, params


def override_params(params: Any, overrides: dict[str, Any], name: str) -> Any:
    """`params.replace(**overrides)` after checking each field exists and each value's type fits its default."""
    fields = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    for field, value in overrides.items():
        if field not in fields:
            raise UnknownEnvError(f"env {name!r}: unknown env param {field!r}; {type(params).__name__} "
                                  f"fields: {sorted(fields)}")
        default = fields[field]
        if not _same_kind(default, value):
            raise UnknownEnvError(f"env {name!r}: env param {field!r} must be like its default "
                                  f"{default!r} ({type(default).__name__}), got {value!r}")
    return params.replace(**overrides) if overrides else params


def _same_kind(default: Any, value: Any) -> bool:
    """bool for bool, int for int, a number for float; anything for other defaults (arrays, tuples)."""
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return True


def check_name(name: str) -> None:
    """Raises UnknownEnvError (or MissingExtraError) unless `make(name)` can build `name`; compiles nothing."""
    suite, _, params = _build(name, {})
    _time_limit(suite, params, name)


def _time_limit(suite: Suite, params: Any, name: str) -> int:
    steps = getattr(params, suite.time_limit_field)
    if int(steps) != steps or steps < 1:
        raise UnknownEnvError(f"env {name!r}: env param {suite.time_limit_field!r} must be a positive "
                              f"whole number of steps, got {steps!r}")
    return int(steps)


def make(name: str, **overrides: Any) -> TimeLimit:
    """`TimeLimit(GymnaxEnv(...), <the params' time limit>)` for a suite name (module docstring).

    `overrides` set env params on top of the defaults and of those given in `name`.
    """
    suite, env, params = _build(name, overrides)
    max_steps = _time_limit(suite, params, name)
    if suite.folds_time_limit:
        params = params.replace(**{suite.time_limit_field: UNREACHABLE_STEPS})
    return TimeLimit(GymnaxEnv(env, params, name), max_steps)
