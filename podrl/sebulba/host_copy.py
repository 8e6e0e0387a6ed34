"""An actor's inference with one host copy per env step (`ActStep`).

An actor thread needs the actions and the agent's extras of every inference on the host. Fetched
leaf by leaf that is one device-to-host copy per leaf (PPO: action, log_prob, value), each with
its own fixed cost. `ActStep` bit-casts every leaf to bytes inside the jitted call and concatenates
them into one `uint8` vector, so one copy brings them all; `unpack` views the host bytes as the
original leaves again. A bit cast, not a conversion: the values are exactly the agent's.

    act_step = ActStep(agent)                        # jitted on first call (the main thread's warm-up)
    packed, actor_state = act_step(params, actor_state, observation, step_keys, t)
    action, extras = act_step.unpack(np.asarray(packed))   # numpy views of that one copy

Leaves must be arrays of a numeric or bool dtype; they are laid out widest item first, so each
view starts at a multiple of its item size. Each traced batch shape records its layout under its
packed size (which grows with the batch), so one `ActStep` serves several batch sizes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from podrl.core.types import Agent


class _Leaf(NamedTuple):
    """Where one leaf lies in the packed bytes."""

    index: int  # its place among the tree's leaves
    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int  # first byte
    nbytes: int


class ActStep:
    """`(params, actor_state, observation [B], step_keys [T], t) -> (packed uint8 bytes, actor_state)`, jitted:
    `agent.act` with step `t`'s key; `unpack(bytes)` -> `(action, extras)` on the host (module docstring)."""

    def __init__(self, agent: Agent):
        self.agent = agent
        self._layouts: dict[int, tuple[Any, list[_Leaf]]] = {}  # packed bytes -> (treedef, leaves), when traced
        self._jitted = jax.jit(self._step)

    def __call__(self, params, actor_state, observation, step_keys, t):
        return self._jitted(params, actor_state, observation, step_keys, t)

    def _step(self, params, actor_state, observation, step_keys, t):
        action, extras, actor_state = self.agent.act(params, actor_state, observation, step_keys[t])
        return self._pack((action, extras)), actor_state

    def _pack(self, tree: Any) -> jax.Array:
        """Inside the jitted call: every leaf of `tree` as bytes, widest item first, in one vector."""
        leaves, treedef = jax.tree.flatten(tree)
        for leaf in leaves:
            if not (jnp.issubdtype(leaf.dtype, jnp.number) or leaf.dtype == jnp.bool_):
                raise TypeError(f"agent.act returned a {leaf.dtype} leaf; actions and agent extras must be "
                                "numeric or bool arrays")
        order = sorted(range(len(leaves)), key=lambda i: -leaves[i].dtype.itemsize)
        layout, parts, offset = [], [], 0
        for i in order:
            leaf = leaves[i]
            size = leaf.size * leaf.dtype.itemsize
            layout.append(_Leaf(i, tuple(leaf.shape), np.dtype(leaf.dtype), offset, size))
            parts.append(_bytes(leaf))
            offset += size
        known = self._layouts.setdefault(offset, (treedef, layout))
        if known != (treedef, layout):
            raise ValueError(f"agent.act's outputs for two batch shapes pack into the same {offset} bytes with "
                             "different layouts; give actions and extras a leading batch axis")
        return jnp.concatenate(parts) if parts else jnp.zeros((0,), jnp.uint8)

    def unpack(self, data: np.ndarray) -> Any:
        """The host bytes of one call -> `(action, extras)` as numpy views of `data`."""
        if data.size not in self._layouts:
            raise RuntimeError(f"ActStep.unpack of {data.size} bytes: no traced step packs that many (call it "
                               "once on this batch shape first)")
        treedef, layout = self._layouts[data.size]
        leaves: list[Any] = [None] * len(layout)
        for leaf in layout:
            leaves[leaf.index] = data[leaf.offset:leaf.offset + leaf.nbytes].view(leaf.dtype).reshape(leaf.shape)
        return jax.tree.unflatten(treedef, leaves)


def _bytes(leaf: jax.Array) -> jax.Array:
    """`leaf` bit-cast to a flat `uint8` vector (bool as 0/1 bytes, which numpy views as bool again)."""
    if leaf.dtype == jnp.bool_:
        return leaf.astype(jnp.uint8).reshape(-1)
    return jax.lax.bitcast_convert_type(leaf, jnp.uint8).reshape(-1)  # [..., itemsize] bytes, flattened
