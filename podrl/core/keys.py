"""Every PRNG key and host seed of a run, derived from its integer seed in one place.

Both layouts call these functions, so a run is a pure function of (seed, update
index) and Anakin on one device equals Sebulba with one actor thread and one
learner device, key for key::

    seed ─ key(seed) ─┬─ params_key ............ agent.init                     (init)
                      ├─ env_key ─ split(·, E) . JAX env resets, one per env of the run;
                      │                          a shard / thread takes its slice
                      └─ run_key ─ fold_in(·, i) = base key of learner shard i (Anakin
                                     │             device i) or of actor thread i (global index)
                                     └─ update_keys(base, u) = split(fold_in(base, u))
                                          ├─ rollout_key ─ step_keys(·, T)   one key per step
                                          │    (env groups: group_step_keys, split(·, G) first)
                                          └─ update_key ── agent.update

    host envs:  host_env_seed(seed, i) = SeedSequence([seed, i])   (thread i's gymnasium seed)
    evaluation: eval_seed(seed, u) = seed + 1_000_003 + u ─ key(·) ─ split(·, S) per training
                seed ─ fold_in(·, shard) ─ split(·, episodes)      (Sebulba: the host reset seed)

Anakin vmaps over `S` seeds: seed `s` of a run with `seed` starts from
`seed_keys(seed + s)`. `podrl.envs.adapters.jax_host.anakin_env_keys` repeats the
`env_key` branch on its side (envs never import podrl); a parity test holds them equal.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from podrl.core.types import Array, PRNGKey

EVAL_SEED_OFFSET = 1_000_003
"""Evaluation seeds start this far from the training seed, so eval envs never replay training envs."""


class SeedKeys(NamedTuple):
    """The three branches of a seed's key tree (see the module docstring)."""

    params: PRNGKey  # agent.init
    env: PRNGKey  # JAX env resets
    run: PRNGKey  # parent of every learner shard's and actor thread's base key


def seed_keys(seed: int | Array) -> SeedKeys:
    """`SeedKeys` of `seed` (a Python int or a traced uint32, e.g. under `vmap` over seeds)."""
    params_key, env_key, run_key = jax.random.split(jax.random.key(seed), 3)
    return SeedKeys(params_key, env_key, run_key)


def env_keys(env_key: PRNGKey, total_envs: int) -> PRNGKey:
    """`[total_envs]` reset keys, one per env of the whole run; each shard/thread slices its own."""
    return jax.random.split(env_key, total_envs)


def base_key(run_key: PRNGKey, index: int | Array) -> PRNGKey:
    """The base key of learner shard `index` (Anakin: device `index`) or of actor thread `index`."""
    return jax.random.fold_in(run_key, index)


def update_keys(base: PRNGKey, index: int | Array) -> tuple[PRNGKey, PRNGKey]:
    """`(rollout_key, update_key)` of update `index` for the actor/learner with key `base`."""
    rollout_key, update_key = jax.random.split(jax.random.fold_in(base, index))
    return rollout_key, update_key


def step_keys(rollout_key: PRNGKey, length: int) -> PRNGKey:
    """`[length]` action keys of one rollout: key `t` samples the action of step `t`."""
    return jax.random.split(rollout_key, length)


def group_step_keys(rollout_key: PRNGKey, length: int, groups: int) -> list[PRNGKey]:
    """`[length]` action keys for each of an actor thread's `groups` env groups: one group takes
    `step_keys(rollout_key, length)` itself; several take those of `split(rollout_key, groups)`."""
    if groups == 1:
        return [step_keys(rollout_key, length)]
    return [step_keys(key, length) for key in jax.random.split(rollout_key, groups)]


def host_env_seed(seed: int, index: int) -> int:
    """The integer reset seed of host env batch `index` (an actor thread) of a run with `seed`."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0] % (2**31))


def eval_seed(seed: int, update: int = 0) -> int:
    """The seed of the greedy evaluation after `update` updates (both layouts vary it per evaluation)."""
    return seed + EVAL_SEED_OFFSET + update


def eval_keys(seed_key: PRNGKey, shard: int | Array, count: int) -> PRNGKey:
    """`[count]` greedy-episode reset keys of learner shard `shard` for one training seed's `seed_key`."""
    return jax.random.split(jax.random.fold_in(seed_key, shard), count)


def per_seed_keys(seed: int | Array, num_seeds: int) -> PRNGKey:
    """`[num_seeds]` keys from one integer seed (one per training seed, e.g. for evaluation)."""
    return jax.random.split(jax.random.key(seed), num_seeds)
