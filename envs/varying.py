"""shard_map's varying-value types, for env code that runs inside a layout's `shard_map`.

Inside `jax.shard_map` (check_vma on), every value's type records the mesh axes it varies
over; the two branches of a `lax.cond` and a scan's carry must agree on them. Envs cannot
import podrl, so the two helpers both need live here; `podrl.core.parallel` builds on them.
Outside shard_map nothing varies and both are identities.
"""

from __future__ import annotations

from typing import Any, Iterable

import jax


def varying_axes(x: Any) -> frozenset:
    """The mesh axes `x` varies over (empty outside shard_map)."""
    return frozenset(jax.typeof(x).manual_axis_type.varying)


def vary_over(tree: Any, axes: Iterable[str]) -> Any:
    """Casts every leaf of `tree` to vary over `axes` too (leaves keep the axes they had)."""
    axes = frozenset(axes)

    def cast(x):
        missing = axes - varying_axes(x)
        return jax.lax.pcast(x, tuple(sorted(missing)), to="varying") if missing else x

    return jax.tree.map(cast, tree)
