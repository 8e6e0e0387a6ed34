"""Axis names and the cross-learner reductions of the data-parallel learner.

Every layout runs `Agent.update` inside `jax.shard_map` over a mesh axis named
`DATA_AXIS` (across all learner devices of all hosts). Agents take gradients
with `learner_value_and_grad`, the one helper that averages them with
`lax.pmean`: the Podracer "replicated learner cores" pattern. The metrics an
update returns are the layout's to average (`learner_metrics`, called by both
layouts after `Agent.update`): an agent may return each shard's own scalars.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.flatten_util import ravel_pytree
from jax.sharding import PartitionSpec as P

from podrl.envs.varying import vary_over, varying_axes

DATA_AXIS = "data"
"""Mesh axis over learner devices (data parallel: batch split, params replicated)."""

POPULATION_AXIS = "population"
"""Anakin's second mesh axis: population members (or seeds) split over device rows; never reduced over."""


def mean_across_learners(tree: Any) -> Any:
    """Averages `tree` (gradients, metrics) over all learner shards.

    The leaves are raveled into one vector first: a single all-reduce operand is
    several times faster than a tuple all-reduce on CPU device meshes (measured
    2.0 ms vs 9.5 ms per 2-device PPO update). Must run inside the layout's
    shard_map; with one shard it is the identity.
    """
    flat, unravel = ravel_pytree(tree)
    return unravel(lax.pmean(flat, axis_name=DATA_AXIS))


def learner_metrics(metrics: Any, checked: bool = True) -> Any:
    """`metrics` (an update's `{name: []}`) averaged over the learner shards, as the layouts report them.

    With shard_map's varying-value check on (`checked`), a leaf typed as varying over `DATA_AXIS`
    (a shard's own loss, computed from its batch) is averaged, all of them in one `pmean`
    (`mean_across_learners`), and a leaf typed invariant (the same on every shard: a learning rate,
    an epsilon, a metric the agent averaged itself) is left as it is, bit for bit. Without the check
    nothing is typed, so a leaf equal on every shard is kept and any other averaged. Inside the layout's
    shard_map; with one shard it is the identity.
    """
    leaves, tree = jax.tree.flatten(metrics)
    if checked:
        varying = [i for i, x in enumerate(leaves) if DATA_AXIS in varying_axes(x)]
        means = mean_across_learners([leaves[i] for i in varying]) if varying else []
        for i, mean in zip(varying, means):
            leaves[i] = mean
        return jax.tree.unflatten(tree, leaves)
    if not leaves:
        return metrics
    flat, unravel = ravel_pytree(leaves)
    extremes = lax.pmax(jnp.concatenate([flat, -flat]), axis_name=DATA_AXIS)
    same = extremes[:flat.size] == -extremes[flat.size:]
    return jax.tree.unflatten(tree, unravel(jnp.where(same, flat, lax.pmean(flat, axis_name=DATA_AXIS))))


def sum_across_learners(tree: Any) -> Any:
    """Sums `tree` over all learner shards (counts, e.g. finished episodes)."""
    return lax.psum(tree, axis_name=DATA_AXIS)


def vary_across_learners(tree: Any) -> Any:
    """Marks replicated (shard-invariant) leaves of `tree` as varying over `DATA_AXIS`.

    Inside `shard_map` with the varying-value check on (the default), JAX
    differentiates a shard-local loss with respect to *invariant* params by
    transposing the implicit invariant->varying cast into a `psum`: the gradient
    comes back already *summed* over shards, and a pmean of it is then the
    identity, i.e. `num_shards` times the mean gradient. Casting the params to
    varying first keeps each shard's gradient local, so the one explicit
    `mean_across_learners` is the only reduction. No-op for varying leaves.
    """

    return vary_over(tree, (DATA_AXIS,))


def match_varying(tree: Any, reference: Any) -> Any:
    """Casts each leaf of `tree` to vary over the mesh axes its `reference` leaf varies over.

    A scan carry that starts from sharded data (e.g. env states from a reset) is
    varying; a step may return a leaf that is the same on every shard (e.g. a
    constant reward) and the carry types would then differ. Outside shard_map
    nothing varies and this is the identity.
    """

    return jax.tree.map(lambda x, ref: vary_over(x, varying_axes(ref)), tree, reference)


def vary_like(tree: Any, reference: jax.Array) -> Any:
    """Casts every leaf of `tree` to vary over the mesh axes `reference` varies over
    (e.g. a loop's initial carry, to match what the loop body makes of sharded inputs)."""
    return match_varying(tree, jax.tree.map(lambda _: reference, tree))


def learner_value_and_grad(grad_fn: Callable[..., Any], params: Any, *args: Any) -> tuple[Any, Any]:
    """`grad_fn(params, *args)` (a `jax.value_and_grad`) on this shard's data,
    with gradients averaged over all learners: the gradient of the global mean loss."""
    value, grads = grad_fn(vary_across_learners(params), *args)
    return value, mean_across_learners(grads)


def without_varying_check(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, inside a layout's `shard_map` traced with the varying-value check off.

    For library code whose loops start from constants and then mix in sharded data, which the
    check refuses (mctx's search: its simulation `while_loop` starts from constant node
    indices, then reads the tree built from the sharded observations). A nested `shard_map`
    over no new mesh axes, with `check_vma=False`, runs `fn` on this shard's values as they are
    (in and out specs `P()`: nothing is split or gathered); its results vary over every manual
    axis. Outside `shard_map` (Sebulba's actors) it is just `fn(*args)`. Never for code that
    takes gradients or reduces across learners: those need the check (see `vary_across_learners`).
    """
    axes = frozenset().union(*(varying_axes(x) for x in jax.tree.leaves(args)))
    if not axes:
        return fn(*args)
    unchecked = jax.shard_map(fn, in_specs=P(), out_specs=P(), axis_names=frozenset(), check_vma=False)
    return unchecked(*args)
