"""Observation normalisation: running mean / variance kept with the params, for any agent.

`RunningStats` holds the count-weighted moments of every observation a learner has seen;
`update_stats` folds in a batch with the parallel update of Chan, Golub & LeVeque (1979)
(Welford's online update for a batch instead of one sample), and `normalize` standardises
and clips. All three are pure; `with_observation_norm` wraps any `podrl.core.types.Agent` so that:

* the statistics travel *with the params* (`{"agent": inner params, "obs_norm": RunningStats}`),
  as DESIGN.md has it for what actors need beyond the weights: the layouts publish params
  to actors as a whole, so an actor normalises with the statistics of the params version it
  holds (Sebulba), and a checkpoint of the train state keeps them (resume);
* `act` / `act_greedy` normalise the observation before the inner agent sees it;
* `update` normalises the trajectory's observations (and bootstrap observations) with the
  statistics the actors used, hands it to the inner `update` (so the loss sees what `act`
  saw: PPO's probability ratio starts at 1), then folds the trajectory into the statistics
  for the next round. The batch moments are averaged across learner shards with
  `podrl.core.parallel.mean_across_learners` (every shard holds a batch of the same size), so the
  statistics are identical on every shard, like the params.

A nested observation (`podrl.envs.observations`) keeps one `RunningStats` per floating-point leaf, by
key (`{key: RunningStats}`); its other leaves (uint8 pixels, integers, the bool `action_mask`) pass
unchanged. A flat observation keeps one `RunningStats` whatever its dtype, as always.

The statistics are never a gradient target: they bypass the optimizer, and `inner.update`
sees only the inner params. Brax's PPO keeps the same statistics (`running_statistics`) and
normalises the policy's and the value function's inputs with them; it does not clip by
default, many peers (SB3's VecNormalize, CleanRL) clip to +-10: `clip` is a config field.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from podrl.core.parallel import mean_across_learners
from podrl.core.types import Agent, Metrics, TrainState, Trajectory
from podrl.envs.observations import is_nested, keyed_leaves, leaf_specs, map_keyed

Array = jax.Array

VARIANCE_EPS = 1e-8
"""Added to the variance before its square root (a constant feature must not divide by 0)."""


class RunningStats(NamedTuple):
    """Moments of the observations seen so far (one entry per observation feature).

    Attributes:
      count: float32 `[]`, observations folded in (per learner shard; every shard's batch
        has the same size, so count ratios, the Chan weights, are the global ones).
      mean: float32 `[*obs]`, their mean.
      var: float32 `[*obs]`, their population variance (1 before any observation).
    """

    count: Array
    mean: Array
    var: Array


def init_stats(obs_shape: tuple[int, ...]) -> RunningStats:
    """No observations yet: count 0, mean 0, variance 1 (`normalize` is then the clip alone)."""
    shape = tuple(obs_shape)
    return RunningStats(jnp.zeros((), jnp.float32), jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32))


def batch_moments(observations: Array, feature_ndim: int) -> RunningStats:
    """The count, mean and population variance of `observations` `[..., *obs]` over its
    leading (batch) axes; `feature_ndim` = len(obs shape)."""
    x = jnp.asarray(observations, jnp.float32)
    axes = tuple(range(x.ndim - feature_ndim))
    count = jnp.asarray(math.prod(x.shape[: len(axes)]), jnp.float32)
    mean = jnp.mean(x, axis=axes)
    var = jnp.mean(jnp.square(x - mean), axis=axes)
    return RunningStats(count, mean, var)


def merge(a: RunningStats, b: RunningStats) -> RunningStats:
    """The moments of the union of the samples `a` and `b` summarise (Chan et al. 1979):
    n = n_a + n_b, mean = mean_a + d n_b / n, M2 = M2_a + M2_b + d^2 n_a n_b / n with
    d = mean_b - mean_a and M2 = var * count. With `a.count` 0 it returns `b`'s moments."""
    count = a.count + b.count
    w_b = b.count / jnp.maximum(count, 1.0)
    delta = b.mean - a.mean
    mean = a.mean + delta * w_b
    var = (1.0 - w_b) * a.var + w_b * b.var + jnp.square(delta) * (1.0 - w_b) * w_b
    return RunningStats(count, mean, var)


def mean_over_shards(local: RunningStats) -> RunningStats:
    """The moments of all learner shards' batches (each shard's of the same size), from this
    shard's `local` ones: the mean of the means, and the mean of each shard's variance plus its
    mean's squared distance to the global mean (the law of total variance). The count stays
    the per-shard one (`RunningStats.count`). Identity with one shard; inside shard_map."""
    mean = mean_across_learners(local.mean)
    var = mean_across_learners(local.var + jnp.square(local.mean - mean))
    return RunningStats(local.count, mean, var)


def init_observation_stats(spec) -> RunningStats | dict[str, RunningStats]:
    """`init_stats` of a flat observation spec; `{key: init_stats}` of a nested one's floating-point leaves."""
    if not is_nested(spec):
        return init_stats(spec.shape)
    return {key: init_stats(leaf.shape) for key, leaf in leaf_specs(spec) if _is_float(leaf.dtype)}


def _is_float(dtype) -> bool:
    return jnp.issubdtype(jnp.dtype(dtype), jnp.floating)


def update_observation_stats(stats, observation):
    """`update_stats` of a flat observation, or of each normalised leaf (`stats` `{key: RunningStats}`)."""
    if isinstance(stats, RunningStats):
        return update_stats(stats, observation)
    leaves = keyed_leaves(observation)
    return {key: update_stats(leaf_stats, leaves[key]) for key, leaf_stats in stats.items()}


def normalize_observation(stats, observation, clip: float):
    """`normalize` of a flat observation, or of each leaf `stats` has (the others pass unchanged)."""
    if isinstance(stats, RunningStats):
        return normalize(stats, observation, clip)
    return map_keyed(lambda key, x: normalize(stats[key], x, clip) if key in stats else x, observation)


def update_stats(stats: RunningStats, observations: Array) -> RunningStats:
    """`stats` with the batch `observations` `[..., *obs]` of every learner shard folded in."""
    batch = mean_over_shards(batch_moments(observations, stats.mean.ndim))
    return merge(stats, batch)


def normalize(stats: RunningStats, observation: Array, clip: float) -> Array:
    """`(observation - mean) / sqrt(var + eps)`, clipped to `[-clip, clip]`: float32 `[..., *obs]`."""
    x = jnp.asarray(observation, jnp.float32)
    z = (x - stats.mean) * jax.lax.rsqrt(stats.var + VARIANCE_EPS)
    return jnp.clip(z, -clip, clip)


# ---------------------------------------------------------------- the agent wrapper


def with_observation_norm(agent: Agent, clip: float) -> Agent:
    """`agent` acting and learning on normalised observations (module docstring); its params
    become `{"agent": agent's params, "obs_norm": RunningStats}`."""
    return Agent(
        init=functools.partial(_init, agent),
        init_actor_state=agent.init_actor_state,
        act=functools.partial(_act, agent, clip),
        act_greedy=functools.partial(_act_greedy, agent, clip),
        update=functools.partial(_update, agent, clip),
        reshard_state=agent.reshard_state,
    )


def _init(agent: Agent, key: Array, env_spec) -> TrainState:
    state = agent.init(key, env_spec)
    return state._replace(params={"agent": state.params, "obs_norm": init_observation_stats(env_spec.observation)})


def _act(agent: Agent, clip: float, params, actor_state, observation: Array, key: Array):
    return agent.act(params["agent"], actor_state, normalize_observation(params["obs_norm"], observation, clip), key)


def _act_greedy(agent: Agent, clip: float, params, actor_state, observation: Array):
    return agent.act_greedy(params["agent"], actor_state, normalize_observation(params["obs_norm"], observation, clip))


def normalize_trajectory(stats, traj: Trajectory, clip: float) -> Trajectory:
    """`traj` with its observations `[T, B, *obs]` and bootstrap observations normalised by `stats`."""
    return traj._replace(observation=normalize_observation(stats, traj.observation, clip),
                         next_observation=normalize_observation(stats, traj.next_observation, clip))


def _update(agent: Agent, clip: float, train_state: TrainState, traj: Trajectory,
            key: Array) -> tuple[TrainState, Metrics]:
    """The inner update on the trajectory normalised with the acting statistics, then the
    statistics updated with the trajectory's raw observations `[T, B, *obs]`."""
    stats = train_state.params["obs_norm"]
    inner_state, metrics = agent.update(train_state._replace(params=train_state.params["agent"]),
                                        normalize_trajectory(stats, traj, clip), key)
    stats = update_observation_stats(stats, traj.observation)
    return inner_state._replace(params={"agent": inner_state.params, "obs_norm": stats}), metrics
