"""Observations as pytrees: their specs leaf by leaf, their keys, and the legal-action mask leaf.

An env's observation is one array (a flat `dm_env.specs.Array` spec, as most envs have) or any
pytree of arrays: dicts, tuples, NamedTuples, nested. Its spec is the same pytree with a
`dm_env.specs.Array` (shape, dtype, and bounds for a `BoundedArray` / `DiscreteArray`) at each
leaf, for ONE env (no batch axis). Everything that carries observations (trajectories, replay
buffers, checkpoints, the host adapters) maps over the leaves; the agents' torsos read them by key.

**Keys.** A leaf's key is its path from the root, the parts joined by "." (`leaf_key`): a dict key,
a NamedTuple field or a tuple index, e.g. "image", "goal.position", "0" (gymnasium's Blackjack-v1:
"0", "1", "2"). A flat observation's single leaf has the key "". Dicts are ordered by
key (JAX's rule), so every reader sees the leaves in one order.

**The legal-action mask.** A discrete env that knows which actions are legal puts a mask in the
observation's top-level leaf named `action_mask` (`ACTION_MASK`): a dict key or a NamedTuple field,
as Jumanji, Pgx and PettingZoo do; bool (or 0/1 integers) `[num_actions]`, True where legal.
gymnasium envs that report `info["action_mask"]` (Taxi) get it there from the host adapter
(`podrl.envs.adapters.gymnasium`). `action_mask(observation)` finds it (None without one).

    spec = {"image": specs.Array((8, 8, 1), np.uint8), "action_mask": specs.Array((4,), bool)}
    leaf_specs(spec)                     # [("action_mask", ...), ("image", ...)]
    zeros(spec, (2,))                    # {"action_mask": bool [2, 4], "image": uint8 [2, 8, 8, 1]}
    action_mask(zeros(spec, (2,)))       # bool [2, 4]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from dm_env import specs

ACTION_MASK = "action_mask"
"""The observation leaf that holds the legal-action mask (module docstring)."""


def is_nested(spec: Any) -> bool:
    """True unless `spec` is one flat `dm_env.specs.Array` (a flat observation)."""
    return not isinstance(spec, specs.Array)


def _part(entry: Any) -> str:
    for name in ("key", "name", "idx"):
        if hasattr(entry, name):
            return str(getattr(entry, name))
    return str(entry)


def leaf_key(path: tuple) -> str:
    """The key of the leaf at `path` (a `jax.tree_util` key path): its parts joined by "."."""
    return ".".join(_part(entry) for entry in path)


def _is_spec(x: Any) -> bool:
    return isinstance(x, specs.Array)


def leaf_specs(spec: Any) -> list[tuple[str, specs.Array]]:
    """`[(key, leaf spec), ...]` of an observation spec, in the order its observations' leaves flatten."""
    flat, _ = jax.tree_util.tree_flatten_with_path(spec, is_leaf=_is_spec)
    return [(leaf_key(path), leaf) for path, leaf in flat]


def keyed_leaves(observation: Any) -> dict[str, Any]:
    """`{key: leaf}` of an observation (or any tree shaped like it)."""
    flat, _ = jax.tree_util.tree_flatten_with_path(observation)
    return {leaf_key(path): leaf for path, leaf in flat}


def map_keyed(fn: Callable[[str, Any], Any], observation: Any) -> Any:
    """`observation` with each leaf `x` replaced by `fn(key, x)`."""
    return jax.tree_util.tree_map_with_path(lambda path, x: fn(leaf_key(path), x), observation)


def zeros(spec: Any, lead: tuple[int, ...] = (), xp: Any = jnp) -> Any:
    """Zeros shaped like one observation of `spec` with leading axes `lead` (`xp`: jax.numpy or numpy)."""
    return jax.tree.map(lambda s: xp.zeros(tuple(lead) + tuple(s.shape), s.dtype), spec, is_leaf=_is_spec)


def structs(spec: Any, lead: tuple[int, ...] = ()) -> Any:
    """`jax.ShapeDtypeStruct`s of one observation of `spec` with leading axes `lead`."""
    return jax.tree.map(lambda s: jax.ShapeDtypeStruct(tuple(lead) + tuple(s.shape), s.dtype), spec, is_leaf=_is_spec)


def map_spec_with(fn: Callable[..., Any], spec: Any, *observations: Any) -> Any:
    """`spec` with each leaf spec replaced by `fn(leaf spec, each observation's leaf there...)`."""
    return jax.tree.map(fn, spec, *observations, is_leaf=_is_spec)


def batch_size(observation: Any, axis: int = 0) -> int:
    """The size of axis `axis` of the observation's leaves (they share it)."""
    return jax.tree.leaves(observation)[0].shape[axis]


def describe(spec: Any) -> str:
    """A short text of an observation spec: "shape (4,)", or "{image: (8, 8, 1) uint8, ...}"."""
    if not is_nested(spec):
        return f"shape {tuple(spec.shape)}"
    items = ", ".join(f"{key}: {tuple(s.shape)} {np.dtype(s.dtype).name}" for key, s in leaf_specs(spec))
    return "{" + items + "}"


def as_tree(observation: Any) -> Any:
    """`observation` with every Mapping as a plain dict and every list as a tuple (dm_env's OrderedDicts,
    gymnasium's Dict samples), so it has the structure of the spec built for it."""
    if isinstance(observation, Mapping):
        return {key: as_tree(value) for key, value in observation.items()}
    if isinstance(observation, list) or (type(observation) is tuple):
        return tuple(as_tree(value) for value in observation)
    if isinstance(observation, tuple) and hasattr(observation, "_fields"):  # a NamedTuple keeps its type
        return type(observation)(*(as_tree(value) for value in observation))
    return observation


# ---------------------------------------------------------------- the legal-action mask


def mask_of(tree: Any) -> Any:
    """The top-level `action_mask` entry of an observation or of its spec (a dict key or a NamedTuple
    field), or None."""
    if isinstance(tree, Mapping):
        return tree.get(ACTION_MASK)
    if isinstance(tree, tuple) and ACTION_MASK in getattr(tree, "_fields", ()):
        return getattr(tree, ACTION_MASK)
    return None


def action_mask(observation: Any) -> Any:
    """The observation's legal-action mask as bool `[..., num_actions]` (True: legal), or None without one."""
    mask = mask_of(observation)
    if mask is None:
        return None
    return mask if mask.dtype == bool else mask != 0
