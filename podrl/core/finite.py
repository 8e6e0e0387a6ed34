"""Non-finite values: the env's inputs (rewards, observations) counted where they are made, and the
checks that stop a run naming the first thing that went NaN/Inf and where it came from.

A NaN reward makes the loss NaN a few ops later; the error names the reward (the cause) before
the metric (the symptom). Training rollouts are counted on device, inside the compiled program
(`count_nonfinite`, a `[T, B]` reduction); evaluation episodes carry per-episode flags
(`podrl.run.evaluation.EvalResult`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from podrl.core.errors import NonFiniteError

NO_UPDATE = np.iinfo(np.int32).max
"""`InputCounts.first_update` when no rollout had a non-finite input."""


class InputCounts(NamedTuple):
    """Env steps whose reward / observation was non-finite (NaN or +-Inf)."""

    reward: Any  # float32 [] (or [S], [threads] on the host): steps with a non-finite reward
    observation: Any  # float32 [] ...: steps with a non-finite float observation
    first_update: Any = NO_UPDATE  # int32: the first update whose rollout had one, NO_UPDATE if none

    @staticmethod
    def zeros() -> "InputCounts":
        zero = jnp.zeros((), jnp.float32)
        return InputCounts(zero, zero, jnp.asarray(NO_UPDATE, jnp.int32))


def nonfinite_flags(xp: Any, reward: Any, observation: Any) -> tuple[Any, Any]:
    """Bool flags shaped like `reward` (`[N]` or `[T, B]`): where the reward is NaN/Inf, and where a float
    leaf of the `observation` pytree (`reward.shape + [...]`) holds one. `xp` is `jax.numpy` (jittable) or
    `numpy`; integer observations (pixels) are never flagged."""
    bad_observation = xp.zeros(reward.shape, bool)
    for leaf in jax.tree.leaves(observation):
        if xp.issubdtype(leaf.dtype, xp.inexact):
            bad_observation = bad_observation | ~xp.all(xp.isfinite(leaf).reshape(reward.shape + (-1,)), axis=-1)
    return ~xp.isfinite(reward), bad_observation


def count_nonfinite(reward: jax.Array, observation: Any, update: jax.Array | int,
                    reduce: Callable[[Any], Any] = lambda counts: counts) -> InputCounts:
    """Counts the non-finite steps of one rollout (`reward` `[T, B]`, `observation` `[T, B, ...]`
    pytree), the counts summed by `reduce` (e.g. over the learner shards); `first_update` is `update`
    when there is one. Jittable."""
    bad_reward, bad_observation = nonfinite_flags(jnp, reward, observation)
    counts = InputCounts(*reduce((jnp.sum(bad_reward, dtype=jnp.float32), jnp.sum(bad_observation, dtype=jnp.float32))))
    bad = (counts.reward + counts.observation) > 0
    return counts._replace(first_update=jnp.where(bad, jnp.asarray(update, jnp.int32), NO_UPDATE))


def add_counts(a: InputCounts, b: InputCounts) -> InputCounts:
    """Sums the counts; keeps the earlier first update."""
    return InputCounts(a.reward + b.reward, a.observation + b.observation,
                       jnp.minimum(a.first_update, b.first_update))


def rows_with_nonfinite(counts: InputCounts) -> list[int]:
    """The indices (seeds, actor threads) whose `[N]` counts are not all zero."""
    return [int(i) for i in np.flatnonzero((np.asarray(counts.reward) + np.asarray(counts.observation)) > 0)]


def _named(counts: InputCounts) -> list[str]:
    return [name for name in ("reward", "observation") if np.any(np.asarray(getattr(counts, name)) > 0)]


def check_training(metrics: dict[str, Any], inputs: InputCounts | None, first: int, last: int,
                   source: str = "") -> None:
    """Raises NonFiniteError if the env's inputs of updates `first..last-1` or a `train/` metric are non-finite.

    The message names the input first (`reward`/`observation`, the update whose training rollout
    had it, `source` e.g. " (actor thread 0)"), then the first metric that became non-finite.
    """
    named = _named(inputs) if inputs is not None else []
    metric = next(((k, v) for k, v in metrics.items() if k.startswith("train/") and not np.all(np.isfinite(v))),
                  None)
    if not named and metric is None:
        return
    parts = []
    if named:
        update = int(np.min(np.asarray(inputs.first_update)))
        parts.append(f"the env returned a non-finite (NaN/Inf) {' and '.join(named)} in the training rollout "
                     f"of update {update}{source}")
    if metric is not None:
        parts.append(f"{metric[0]} became {metric[1]} during updates {first}..{last - 1}")
    hint = ("fix the env's rewards/observations (or wrap it to clip or replace them)" if named
            else "lower the learning rate or check the env's rewards/observations")
    raise NonFiniteError("; ".join(parts) + f"; stopping ({hint})")


def check_evaluation(bad_reward: Any, bad_observation: Any, episodes: int, update: int) -> None:
    """Raises NonFiniteError if greedy evaluation episodes after update `update` met a non-finite reward or
    observation (`bad_*`: how many of the `episodes` episodes did, per member `[S]` or a scalar)."""
    counts = {"reward": np.asarray(bad_reward), "observation": np.asarray(bad_observation)}
    named = [name for name, c in counts.items() if np.any(c > 0)]
    if named:
        count = int(max(np.max(counts[n]) for n in named))
        raise NonFiniteError(f"the env returned a non-finite (NaN/Inf) {' and '.join(named)} in {count} of "
                             f"{episodes} greedy episode(s) of the evaluation after update {update}; "
                             "stopping (fix the env's rewards/observations; training itself saw none)")
