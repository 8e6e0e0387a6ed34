"""xland-minigrid's MiniGrid tasks as podrl `JaxEnv`s: `xminigrid:<id>`.

Names (a row of `podrl.envs.schemes`: accepted by `podrl.envs.make`, `podrl.envs.registry.check_name`
and, stepped on the host for Sebulba, by `podrl.envs.adapters.make_host_env` as they are or after `jax:`)::

    xminigrid:MiniGrid-DoorKey-5x5                any MiniGrid-* id of xminigrid.registered_environments()
    xminigrid:MiniGrid-Empty-8x8,max_steps=100    env params (view_size, max_steps, ...) overridden

Env params: xland-minigrid's `EnvParams` of the id, with overrides given as `field=value` items after
the id or as keyword arguments of `podrl.envs.make` (`podrl.envs.gymnax.override_params`: an unknown
field or a value of the wrong type is an `UnknownEnvError` naming it). The XLand-MiniGrid-* ids are
refused: their tasks are rulesets sampled from a benchmark that xland-minigrid downloads
(`xminigrid.load_benchmark`), which this adapter does not load.

Observations: `{"img": uint8 [V, V, 2], "direction": int32 []}` (V = `view_size`, default 7): the
agent's egocentric view, each cell a (tile id, colour id) pair bounded by xland-minigrid's
`NUM_TILES` and `NUM_COLORS`, and the direction it faces (0-3), as xland-minigrid's
`DirectionObservationWrapper` and Farama's MiniGrid give it. The torso embeds the ids
(`podrl.agents.inputs`: a bounded integer image gets `embed_cnn`, the direction `embed`), never
reads them as pixels. Actions: int32 `[]` of 6 (left, right, forward, pick up, put down, toggle).

Termination vs truncation. xland-minigrid's step already tells them apart: reaching the goal ends
the episode with discount 0; `step_num == max_steps` ends it with discount 1, a truncation here
(LAST, `extras["truncated"]`). Its reward, `1 - 0.9 * step_num / max_steps` on success, depends on
`max_steps`, so the time limit stays in the env rather than moving to `envs.TimeLimit`.
"""

from __future__ import annotations

import difflib
from typing import Any

import jax.numpy as jnp
import numpy as np
from dm_env import specs

from podrl.envs.errors import UnknownEnvError
from podrl.envs.gymnax import override_params, parse_name
from podrl.envs.types import ActionSpec, Array, ObservationSpec, PRNGKey, TimeStep, ending, restart

_LAST = 2
"""xland-minigrid's `StepType.LAST`."""
XLAND_PREFIX = "XLand-MiniGrid-"
"""The ids whose rulesets come from a downloaded benchmark (refused: module docstring)."""


class XMiniGridEnv:
    """An xland-minigrid env with fixed `params` as a podrl `JaxEnv`; state: xland-minigrid's `TimeStep`
    (its `State` and last observation). No auto-reset (the layouts' `podrl.envs.wrap_for_training`);
    the time limit is the env's own (module docstring). Every timestep's extras hold "truncated"."""

    shard_map_check_vma = False
    """xland-minigrid's actions return constants from one branch of a `lax.cond` (the agent's pocket), which
    shard_map's varying-value check rejects (as gymnax's loops, `podrl.envs.gymnax`): Anakin maps it with it off."""

    def __init__(self, env: Any, params: Any, name: str, constants: Any):
        self.env, self.params, self.name = env, params, name
        view = int(params.view_size)
        high = np.broadcast_to(np.array([constants.NUM_TILES - 1, constants.NUM_COLORS - 1], np.uint8), (view, view, 2))
        self._observation_spec = {
            "img": specs.BoundedArray((view, view, 2), np.uint8, np.zeros_like(high), high, name="img"),
            "direction": specs.BoundedArray((), np.int32, 0, 3, name="direction"),
        }
        self._action_spec = specs.DiscreteArray(int(env.num_actions(params)), dtype=np.int32, name="action")

    def reset(self, key: PRNGKey) -> tuple[Any, TimeStep]:
        timestep = self.env.reset(self.params, key)
        return timestep, restart(self._observe(timestep), {"truncated": jnp.asarray(False)})

    def step(self, state: Any, action: Array) -> tuple[Any, TimeStep]:
        timestep = self.env.step(self.params, state, action)
        last = timestep.step_type == _LAST
        return timestep, ending(self._observe(timestep), timestep.reward, last & (timestep.discount == 0),
                                last & (timestep.discount != 0))

    def observation_spec(self) -> ObservationSpec:
        return self._observation_spec

    def action_spec(self) -> ActionSpec:
        return self._action_spec

    @staticmethod
    def _observe(timestep: Any) -> dict[str, Array]:
        return {"img": timestep.observation, "direction": timestep.state.agent.direction.astype(jnp.int32)}


def _import_xminigrid():
    from podrl.envs.adapters.optional import import_optional

    return import_optional("xminigrid", "xland-minigrid", "xminigrid", "xminigrid>=0.9")


def _build(name: str, overrides: dict[str, Any]) -> XMiniGridEnv:
    _, env_id, from_name = parse_name(name)
    xminigrid = _import_xminigrid()
    ids = [i for i in xminigrid.registered_environments() if not i.startswith(XLAND_PREFIX)]
    if env_id.startswith(XLAND_PREFIX):
        raise UnknownEnvError(f"env {name!r}: the {XLAND_PREFIX}* tasks need a ruleset from a benchmark that "
                              f"xland-minigrid downloads, which podrl does not load; the MiniGrid tasks are {ids}")
    if env_id not in ids:
        close = difflib.get_close_matches(env_id, ids, n=3)
        hint = f"did you mean {close}? " if close else ""
        raise UnknownEnvError(f"unknown env {name!r}: {env_id!r} is not an xminigrid env; {hint}xminigrid envs: {ids}")
    env, params = xminigrid.make(env_id)
    params = override_params(params, {**from_name, **overrides}, name)
    for field in ("max_steps", "view_size"):
        value = getattr(params, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UnknownEnvError(f"env {name!r}: env param {field!r} must be a positive int, got {value!r}")
    from xminigrid.core import constants

    return XMiniGridEnv(env, params, name, constants)


def check_name(name: str) -> None:
    """Raises UnknownEnvError (or MissingExtraError) unless `make(name)` can build `name`; compiles nothing."""
    _build(name, {})


def make(name: str, **overrides: Any) -> XMiniGridEnv:
    """`XMiniGridEnv` for an 'xminigrid:<id>[,field=value...]' name (module docstring); `overrides` set env
    params on top of the defaults and of those given in `name`."""
    return _build(name, overrides)
