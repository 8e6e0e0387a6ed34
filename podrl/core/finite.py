"""Non-finite values: the env's inputs (rewards, observations) counted where they are made, and the
checks that stop a run naming the first thing that went NaN/Inf and where it came from.

A NaN reward makes the loss NaN a few ops later; the error names the reward (the cause) before
the metric (the symptom). An observation whose legal-action mask (`podrl.envs.observations.action_mask`)
allows no action is counted the same way: no agent can act on it, so the run stops naming the env and
the update (a terminal observation may have an all-False mask: it is only a bootstrap state, never
acted on, and is not counted). Training rollouts are counted on device, inside the compiled program
(`count_nonfinite`, a `[T, B]` reduction); evaluation episodes carry per-episode flags
(`podrl.run.evaluation.EvalResult`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from podrl.core.errors import NoLegalActionError, NonFiniteError
from podrl.envs.observations import action_mask

NO_UPDATE = np.iinfo(np.int32).max
"""`InputCounts.first_update` when no rollout had a non-finite input."""


class InputCounts(NamedTuple):
    """Env steps whose reward / observation was non-finite (NaN or +-Inf), or whose mask allowed no action."""

    reward: Any  # float32 [] (or [S], [threads] on the host): steps with a non-finite reward
    observation: Any  # float32 [] ...: steps with a non-finite float observation
    first_update: Any = NO_UPDATE  # int32: the first update whose rollout had one, NO_UPDATE if none
    no_legal_action: Any = 0.0  # float32 [] ...: steps acted on whose observation's action_mask is all False

    @staticmethod
    def zeros() -> "InputCounts":
        zero = jnp.zeros((), jnp.float32)
        return InputCounts(zero, zero, jnp.asarray(NO_UPDATE, jnp.int32), zero)


def nonfinite_flags(xp: Any, reward: Any, observation: Any) -> tuple[Any, Any]:
    """Bool flags shaped like `reward` (`[N]` or `[T, B]`): where the reward is NaN/Inf, and where a float
    leaf of the `observation` pytree (`reward.shape + [...]`) holds one. `xp` is `jax.numpy` (jittable) or
    `numpy`; integer observations (pixels) are never flagged."""
    bad_observation = xp.zeros(reward.shape, bool)
    for leaf in jax.tree.leaves(observation):
        if xp.issubdtype(leaf.dtype, xp.inexact):
            bad_observation = bad_observation | ~xp.all(xp.isfinite(leaf).reshape(reward.shape + (-1,)), axis=-1)
    return ~xp.isfinite(reward), bad_observation


def no_legal_flags(xp: Any, observation: Any, shape: tuple[int, ...]) -> Any:
    """bool `shape` (the batch's): True where the observation's `action_mask` allows no action (all False);
    all False without a mask. `xp`: numpy or jax.numpy."""
    mask = action_mask(observation)
    return xp.zeros(shape, bool) if mask is None else ~xp.any(xp.asarray(mask), axis=-1)


def count_nonfinite(reward: jax.Array, observation: Any, update: jax.Array | int,
                    reduce: Callable[[Any], Any] = lambda counts: counts) -> InputCounts:
    """Counts the non-finite steps of one rollout (`reward` `[T, B]`, `observation` `[T, B, ...]`
    pytree), the counts summed by `reduce` (e.g. over the learner shards); `first_update` is `update`
    when there is one. Jittable."""
    bad_reward, bad_observation = nonfinite_flags(jnp, reward, observation)
    sums = (jnp.sum(bad_reward, dtype=jnp.float32), jnp.sum(bad_observation, dtype=jnp.float32))
    mask = action_mask(observation)
    if mask is None:  # no mask: the counts (and the program) of before
        counts = InputCounts(*reduce(sums), no_legal_action=jnp.zeros((), jnp.float32))
    else:
        empty = jnp.sum(~jnp.any(mask, axis=-1), dtype=jnp.float32)
        reward_count, observation_count, empty = reduce(sums + (empty,))
        counts = InputCounts(reward_count, observation_count, no_legal_action=empty)
    bad = (counts.reward + counts.observation + counts.no_legal_action) > 0
    return counts._replace(first_update=jnp.where(bad, jnp.asarray(update, jnp.int32), NO_UPDATE))


def add_counts(a: InputCounts, b: InputCounts) -> InputCounts:
    """Sums the counts; keeps the earlier first update."""
    return InputCounts(a.reward + b.reward, a.observation + b.observation,
                       jnp.minimum(a.first_update, b.first_update), a.no_legal_action + b.no_legal_action)


def rows_with_nonfinite(counts: InputCounts) -> list[int]:
    """The indices (seeds, actor threads) whose `[N]` counts are not all zero."""
    total = np.asarray(counts.reward) + np.asarray(counts.observation) + np.asarray(counts.no_legal_action)
    return [int(i) for i in np.flatnonzero(total > 0)]


def _named(counts: InputCounts) -> list[str]:
    return [name for name in ("reward", "observation") if np.any(np.asarray(getattr(counts, name)) > 0)]


def check_training(metrics: dict[str, Any], inputs: InputCounts | None, first: int, last: int,
                   source: str = "", env: str = "") -> None:
    """Raises NonFiniteError if the env's inputs of updates `first..last-1` or a `train/` metric are non-finite,
    or an observation acted on allowed no action (`check_legal_actions`, naming `env`).

    The message names the input first (`reward`/`observation`, the update whose training rollout
    had it, `source` e.g. " (actor thread 0)"), then the first metric that became non-finite.
    """
    if inputs is not None:
        check_legal_actions(inputs, source, env)
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


def check_legal_actions(inputs: InputCounts, source: str = "", env: str = "") -> None:
    """Raises NoLegalActionError if a training rollout acted on an observation whose `action_mask` was all False,
    naming `env`, the update (its first) and how many steps."""
    count = int(np.sum(np.asarray(inputs.no_legal_action)))
    if count:
        update = int(np.min(np.asarray(inputs.first_update)))
        raise NoLegalActionError(
            f"env {env or '(unnamed)'} returned {count} observation(s) whose action_mask allows no action (all "
            f"False) for the agent to act on, in the training rollout of update {update}{source}; every observation "
            f"an episode continues from needs a legal action (an episode's final observation may have none: it is "
            f"never acted on): fix the env's mask or end the episode there")


def check_evaluation(bad_reward: Any, bad_observation: Any, episodes: int, update: int, no_legal: Any = 0,
                     env: str = "") -> None:
    """Raises NonFiniteError if greedy evaluation episodes after update `update` met a non-finite reward or
    observation (`bad_*`: how many of the `episodes` episodes did, per member `[S]` or a scalar), and
    NoLegalActionError if some met an observation to act on whose `action_mask` allows nothing (`no_legal`,
    counted the same way; `env` names the env)."""
    if np.any(np.asarray(no_legal) > 0):
        count = int(np.max(np.asarray(no_legal)))
        raise NoLegalActionError(
            f"env {env or '(unnamed)'} returned an observation whose action_mask allows no action (all False) "
            f"for the greedy policy to act on, in {count} of {episodes} episode(s) of the evaluation after update "
            f"{update}; every observation an episode continues from needs a legal action: fix the env's mask or "
            f"end the episode there")
    counts = {"reward": np.asarray(bad_reward), "observation": np.asarray(bad_observation)}
    named = [name for name, c in counts.items() if np.any(c > 0)]
    if named:
        count = int(max(np.max(counts[n]) for n in named))
        raise NonFiniteError(f"the env returned a non-finite (NaN/Inf) {' and '.join(named)} in {count} of "
                             f"{episodes} greedy episode(s) of the evaluation after update {update}; "
                             "stopping (fix the env's rewards/observations; training itself saw none)")
