"""Jumanji environments as podrl `JaxEnv`s: `jumanji:<id>`, with their nested observations and action masks.

Names (a row of `podrl.envs.schemes`: accepted by `podrl.envs.make`, `podrl.envs.registry.check_name`
and, stepped on the host for Sebulba, by `podrl.envs.adapters.make_host_env` as they are or after `jax:`)::

    jumanji:Knapsack-v1                           any id of jumanji.registered_environments()
    jumanji:Snake-v1,time_limit=500               keyword arguments of the env's constructor

`field=value` items after the id are keyword arguments of `jumanji.make(id, ...)` (values Python
literals); an unknown id or keyword is an `UnknownEnvError` naming it, before anything compiles.

Observations. Jumanji's observations are NamedTuples and chex dataclasses described by a tree of
jumanji specs; `JumanjiEnv` gives them as nested dicts keyed by the spec's field names (BinPack's
`{"ems": {"x1": ..., ...}, "items": {...}, "action_mask": ..., ...}`) with the same tree of dm_env
specs (`podrl.envs.observations`), so the legal-action mask is the top-level `action_mask` leaf the
agents honour. Leaves keep Jumanji's dtypes and bounds.

Actions. A `DiscreteArray` action stays one; a `MultiDiscreteArray` (BinPack's `[ems, item]`,
Tetris' `[rotation, column]`) becomes one Discrete over the joint actions, `ravel_multi_index`
order (the last dimension fastest), and a mask shaped like the joint action space (`[40, 20]`) is
flattened the same way (`[800]`). Per-agent masks (Cleaner's `[agents, actions]`), vector rewards
(multi-agent envs) and continuous actions are refused with an `UnknownEnvError` saying why.

No legal action. Jumanji may go on from a state whose mask allows no action (a Snake trapped by its own
body: every move crashes it), where podrl's agents refuse to act (`podrl.core.errors.NoLegalActionError`).
There the adapter's mask allows every action, as Jumanji's own agents do in effect (their masked logits
are all equal): the env then ends the episode itself. An episode's final observation keeps its mask (a
full Knapsack's is all False): nothing acts on it.

Termination vs truncation. Jumanji folds its time limit into termination (Snake, Maze, Sokoban,
Tetris, ...: `step_count >= self.time_limit` ends the episode with discount 0), as Craftax does.
An env with an integer `time_limit` attribute gets it out of reach (`UNREACHABLE_STEPS`, after its
specs, which may use it as a bound, are read) and `envs.TimeLimit` ends its episodes at the real
limit as truncations (a LAST step with discount 1 and `extras["truncated"]`); its other episode
ends stay terminations (discount 0). A LAST step Jumanji gives discount > 0 (its own `truncation`)
stays a truncation. Envs without a time limit (Knapsack, BinPack, TSP) end by termination only.
Sokoban-v0 downloads its levels from the Hugging Face Hub when built: without a network it is an
`UnknownEnvError` naming that.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

import jax.numpy as jnp
import numpy as np
from dm_env import specs

from podrl.envs.errors import UnknownEnvError
from podrl.envs.gymnax import UNREACHABLE_STEPS, parse_name
from podrl.envs.observations import ACTION_MASK
from podrl.envs.types import ActionSpec, Array, ObservationSpec, PRNGKey, TimeStep, ending, restart
from podrl.envs.wrappers import TimeLimit

_LAST = 2
"""Jumanji's `StepType.LAST`."""
MAX_JOINT_ACTIONS = 65_536
"""A MultiDiscrete action with more joint actions than this is refused (one categorical over all of them)."""


class JumanjiEnv:
    """A Jumanji env (`reset(key)`, `step(state, action)`) as a podrl `JaxEnv`; state: Jumanji's own.

    No time limit and no auto-reset: `make` adds `envs.TimeLimit` where the env has one, the layouts
    `podrl.envs.wrap_for_training`. Observations: nested dicts (module docstring); actions int32 `[]`.
    Every timestep's extras hold "truncated" (bool `[]`).
    """

    shard_map_check_vma = False
    """Jumanji's generators start loop carries from constants (BinPack's `while_loop`), which shard_map's
    varying-value check rejects (as gymnax's do, `podrl.envs.gymnax`): Anakin maps them with it off."""

    def __init__(self, env: Any, name: str):
        self.env, self.name = env, name
        self._num_values = _action_dims(env.action_spec, name)
        self._multi = np.ndim(env.action_spec.num_values) > 0  # a MultiDiscreteArray, flattened
        self._observation_spec = self._convert_spec(env.observation_spec)
        self._action_spec = specs.DiscreteArray(math.prod(self._num_values), dtype=np.int32, name="action")

    def reset(self, key: PRNGKey) -> tuple[Any, TimeStep]:
        state, ts = self.env.reset(key)
        return state, restart(self._observe(ts.observation), {"truncated": jnp.asarray(False)})

    def step(self, state: Any, action: Array) -> tuple[Any, TimeStep]:
        state, ts = self.env.step(state, self._unflatten(action))
        last = ts.step_type == _LAST
        return state, ending(self._observe(ts.observation, last), ts.reward, last & (ts.discount == 0),
                             last & (ts.discount != 0))

    def observation_spec(self) -> ObservationSpec:
        return self._observation_spec

    def action_spec(self) -> ActionSpec:
        return self._action_spec

    def _unflatten(self, action: Array) -> Array:
        """The joint action int32 `[]` as Jumanji's int32 `[D]` (a MultiDiscrete env), else as it is."""
        if not self._multi:
            return action
        return jnp.stack(jnp.unravel_index(action, self._num_values)).astype(jnp.int32)

    def _observe(self, observation: Any, ended: Array | bool = False) -> Any:
        """The observation as nested dicts, its mask flattened; where the episode goes on (not `ended`) from a
        state with no legal action (a trapped Snake), a mask allowing every action (module docstring)."""
        tree = _as_dicts(observation, self._observation_spec)
        if not isinstance(tree, dict) or ACTION_MASK not in tree:
            return tree
        mask = tree[ACTION_MASK]
        if self._multi:
            mask = mask.reshape(mask.shape[:-len(self._num_values)] + (-1,))
        tree[ACTION_MASK] = jnp.where(jnp.any(mask, axis=-1, keepdims=True) | ended, mask, True)
        return tree

    def _convert_spec(self, spec: Any) -> Any:
        tree = _dm_specs(spec)
        mask = tree.get(ACTION_MASK) if isinstance(tree, dict) else None
        if mask is not None and self._multi:
            if tuple(mask.shape) != self._num_values:
                raise UnknownEnvError(f"env {self.name!r}: its MultiDiscrete action {list(self._num_values)} has an "
                                      f"action_mask of shape {tuple(mask.shape)}, not one mask over the joint "
                                      f"actions (shape {self._num_values}): per-agent masks are not supported")
            tree[ACTION_MASK] = specs.BoundedArray((math.prod(self._num_values),), np.bool_, False, True,
                                                   name=ACTION_MASK)
        return tree


def _action_dims(spec: Any, name: str) -> tuple[int, ...]:
    """The action's `num_values` per dimension (one for a DiscreteArray); UnknownEnvError for the others."""
    if not hasattr(spec, "num_values"):
        raise UnknownEnvError(f"env {name!r}: its action spec is {type(spec).__name__}; podrl takes Jumanji's "
                              "DiscreteArray and MultiDiscreteArray actions")
    dims = tuple(int(n) for n in np.ravel(np.asarray(spec.num_values)))
    if math.prod(dims) > MAX_JOINT_ACTIONS:
        raise UnknownEnvError(f"env {name!r}: its MultiDiscrete action {list(dims)} has {math.prod(dims):,} joint "
                              f"actions, more than the {MAX_JOINT_ACTIONS:,} podrl flattens into one Discrete")
    return dims


def _dm_specs(spec: Any) -> Any:
    """A jumanji spec tree as nested dicts of dm_env specs (numpy bounds), keyed by its fields."""
    from jumanji import specs as jumanji_specs

    if not isinstance(spec, jumanji_specs.Array):
        return {key: _dm_specs(child) for key, child in vars(spec).items() if isinstance(child, jumanji_specs.Spec)}
    shape, dtype, name = tuple(spec.shape), np.dtype(spec.dtype), spec.name or None
    if hasattr(spec, "num_values") and shape == ():
        return specs.DiscreteArray(int(spec.num_values), dtype=dtype, name=name)
    if hasattr(spec, "minimum"):
        low, high = (np.broadcast_to(np.asarray(b, dtype), shape) for b in (spec.minimum, spec.maximum))
        return specs.BoundedArray(shape, dtype, low, high, name=name)
    return specs.Array(shape, dtype, name=name)


def _as_dicts(value: Any, spec: Any) -> Any:
    """A Jumanji observation (NamedTuples, dataclasses) as the nested dicts of its converted `spec`."""
    if not isinstance(spec, dict):
        return value
    return {key: _as_dicts(getattr(value, key), child) for key, child in spec.items()}


# ---------------------------------------------------------------- names


def _import_jumanji():
    from podrl.envs.adapters.optional import import_optional

    return import_optional("jumanji", "jumanji", "jumanji", "jumanji>=1.1")


def _build(name: str, overrides: dict[str, Any]) -> Any:
    """Jumanji's env for `name` with its constructor `overrides`; UnknownEnvError for a bad id or keyword."""
    _, env_id, from_name = parse_name(name)
    jumanji = _import_jumanji()
    ids = sorted(jumanji.registered_environments())
    if env_id not in ids:
        close = difflib.get_close_matches(env_id, ids, n=3)
        hint = f"did you mean {close}? " if close else ""
        raise UnknownEnvError(f"unknown env {name!r}: {env_id!r} is not a jumanji env; {hint}jumanji envs: {ids}")
    kwargs = {**from_name, **overrides}
    limit = kwargs.get("time_limit", 1)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UnknownEnvError(f"env {name!r}: time_limit must be a positive number of steps, got {limit!r}")
    try:
        return jumanji.make(env_id, **kwargs)
    except (TypeError, ValueError) as e:  # an unknown constructor keyword, or a value it refuses
        raise UnknownEnvError(f"env {name!r}: jumanji's {env_id} does not take the options {kwargs} "
                              f"({type(e).__name__}: {e})") from e
    except OSError as e:  # a dataset it downloads (Sokoban's levels from the Hugging Face Hub)
        raise UnknownEnvError(f"env {name!r}: jumanji could not build {env_id}: it needs a file it downloads "
                              f"({type(e).__name__}: {e})") from e


def _checked(env: Any, name: str) -> tuple[JumanjiEnv, int | None]:
    """`(JumanjiEnv, the env's time limit or None)`; UnknownEnvError for what podrl cannot take."""
    limit = getattr(env, "time_limit", None)
    if not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 1:
        limit = None  # none (a Knapsack), or not a step count podrl knows how to lift out
    if tuple(env.reward_spec.shape) != ():
        raise UnknownEnvError(f"env {name!r}: its reward has shape {tuple(env.reward_spec.shape)} (one per agent); "
                              "podrl's agents take one scalar reward")
    return JumanjiEnv(env, name), limit


def check_name(name: str) -> None:
    """Raises UnknownEnvError (or MissingExtraError) unless `make(name)` can build `name`; compiles nothing."""
    _checked(_build(name, {}), name)


def make(name: str, **overrides: Any) -> JumanjiEnv | TimeLimit:
    """`JumanjiEnv` for a 'jumanji:<id>[,field=value...]' name, in a `TimeLimit` at the env's own
    `time_limit` where it has one (which the env then never reaches: module docstring)."""
    raw = _build(name, overrides)
    env, limit = _checked(raw, name)  # reads the specs first: they may be bounded by the time limit
    if limit is None:
        return env
    raw.time_limit = UNREACHABLE_STEPS
    return TimeLimit(env, int(limit))
