"""MuZero Reanalyse: fresh search targets for a share of each replayed batch, inside the learner update.

Schrittwieser et al. 2021 ("Online and offline reinforcement learning by planning with a learned
model", NeurIPS; MuZero 2020, Appendix H): instead of the search statistics the actors stored when
they acted, a replayed window's targets are recomputed by searching again from its stored
observations with the learner's newer networks. For the first `m = round(reanalyse_fraction *
batch_size)` of a batch's `N` windows (the windows are drawn independently, so these are a random
subset), every state the loss unrolls to gets

- a fresh **policy target**: the action weights of the config's search (with its acting-time root
  noise, as the stored targets had) run from the stored observation o_{t+k}, k = 0..K, with the
  `reanalyse_network`'s params (the online params of this gradient step, or the target network's);
- a fresh **value bootstrap**: the root value after the target network's search without root noise
  (`greedy=True`) from o'_{t+k+m-1}, the observation the n-step return of state k bootstraps from
  (`podrl.agents.replay.n_step_targets`' `last`; before an episode end it stops there).

The rest of the batch keeps the actors' stored policies and the target network's plain values
(`podrl.agents.muzero.agent.batch_from_windows`). Both searches are batched over the `m * (K + 1)`
states (mctx is batched natively), on the learner's device, in either layout.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from podrl.agents.muzero import search
from podrl.agents.replay import n_step_targets
from podrl.core.parallel import without_varying_check

Array = jax.Array


def reanalysed_count(config: Any) -> int:
    """Windows of each batch whose targets are recomputed: round(reanalyse_fraction * batch_size)."""
    return int(round(config.reanalyse_fraction * config.batch_size))


def bootstrap_steps(config: Any, windows: Any) -> Array:
    """int32 `[N, K + 1]`: for each window and state k = 0..K, the window step whose next observation
    the state's n-step value target bootstraps from (`n_step_targets`' `last`)."""
    episode_end = (windows.discount == 0.0) | windows.truncated
    last = jax.vmap(lambda r, d, e: n_step_targets(r, d, e, config.td_steps, config.gamma)[2])(
        windows.reward, windows.discount, episode_end)
    return last[:, : config.unroll_steps + 1]


def _searched(config: Any, network: Any, params, observation: Array, key: Array, greedy: bool):
    """The config's search from observations `[M, S, *obs]` flattened to `[M * S, *obs]`:
    (action weights `[M, S, A]`, root values after search `[M, S]`)."""
    lead = jax.tree.leaves(observation)[0].shape[:2]
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), observation)
    out = without_varying_check(lambda p, o, k: search.search(config, network, p, o, k, greedy), params, flat, key)
    weights = out.action_weights.astype(jnp.float32)
    return weights.reshape(lead + weights.shape[1:]), out.search_tree.summary().value.reshape(lead)


def reanalyse(config: Any, network: Any, params, target_params, windows: Any, bootstrap: Array,
              key: Array) -> tuple[Any, Array]:
    """The first `reanalysed_count(config)` of windows `[N, L]` (`podrl.agents.muzero.agent.Step`s)
    with fresh targets (module docstring); `bootstrap` `[N, L]` holds the values the value targets
    bootstrap from (v(o'_{t+j}) at step j), returned with the reanalysed windows' entries replaced.

    `key` is split in two, `policy_key, value_key = jax.random.split(key)`: the policy search runs
    with `policy_key`, the value search with `value_key`. Returns `(windows, bootstrap)`."""
    m, k1 = reanalysed_count(config), config.unroll_steps + 1
    if m == 0:
        return windows, bootstrap
    policy_key, value_key = jax.random.split(key)
    policy_params = params if config.reanalyse_network == "online" else target_params
    first_states = jax.tree.map(lambda x: x[:m, :k1], windows.observation)
    fresh_policy, _ = _searched(config, network, policy_params, first_states, policy_key, False)
    last = bootstrap_steps(config, jax.tree.map(lambda x: x[:m], windows))  # [m, K + 1]
    rows = jnp.arange(m)[:, None]
    bootstrap_states = jax.tree.map(lambda x: x[rows, last], windows.next_observation)
    _, fresh_value = _searched(config, network, target_params, bootstrap_states, value_key, True)
    policy = windows.policy.at[:m, :k1].set(fresh_policy)
    bootstrap = bootstrap.at[rows, last].set(fresh_value)
    return windows._replace(policy=policy), bootstrap
