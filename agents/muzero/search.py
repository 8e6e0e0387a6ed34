"""Acting with search: mctx's MuZero / Gumbel MuZero policy over the learned model.

`search(config, network, params, observation [B, *obs], key, greedy)` runs `num_simulations` simulations
from the represented root for the whole batch (mctx is batched natively), the observation's legal
actions (its `action_mask` leaf) given to mctx as the root's `invalid_actions` (so the actions
searched, acted and greedily chosen, and the action weights the policy targets are, are legal ones) and returns mctx's
`PolicyOutput`: `action [B]`, `action_weights [B, A]` (the visit distribution for muzero, the
improved policy for gumbel: the policy targets) and the search tree (its root value). Acting
(`greedy=False`) adds the root noise (Dirichlet, Gumbel) and samples; evaluation (`greedy=True`)
takes the most visited action (muzero, no noise) or Gumbel MuZero's choice without Gumbel noise.
Inside Anakin's `shard_map` the search is traced with the varying-value check off
(`podrl.core.parallel.without_varying_check`): mctx's simulation loop starts from constants.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import mctx

from podrl.agents.masking import action_mask, invalid_actions
from podrl.agents.muzero.networks import MuZeroNetwork
from podrl.agents.muzero.targets import logits_to_scalar
from podrl.core.parallel import without_varying_check

Array = jax.Array


def root(network: MuZeroNetwork, support_size: int, params, observation: Array) -> mctx.RootFnOutput:
    """The search root of observations `[B, *obs]`: prior logits `[B, A]`, value `[B]`, hidden state."""
    state = network.apply(params, observation, method=MuZeroNetwork.represent)
    policy_logits, value_logits = network.apply(params, state, method=MuZeroNetwork.predict)
    return mctx.RootFnOutput(prior_logits=policy_logits, value=logits_to_scalar(value_logits, support_size),
                             embedding=state)


def make_recurrent_fn(network: MuZeroNetwork, support_size: int, gamma: float) -> Callable[..., Any]:
    """mctx's `recurrent_fn(params, key, action [B], state [B, D]) -> (RecurrentFnOutput, next state)`:
    one dynamics and prediction step of the model, discount `gamma` (the model predicts no ends)."""

    def recurrent_fn(params, key, action, state):
        del key
        next_state, reward_logits = network.apply(params, state, action, method=MuZeroNetwork.dynamics)
        policy_logits, value_logits = network.apply(params, next_state, method=MuZeroNetwork.predict)
        output = mctx.RecurrentFnOutput(
            reward=logits_to_scalar(reward_logits, support_size),
            discount=jnp.full(action.shape, gamma, jnp.float32),
            prior_logits=policy_logits,
            value=logits_to_scalar(value_logits, support_size))
        return output, next_state

    return recurrent_fn


def search(config: Any, network: MuZeroNetwork, params, observation: Array, key: Array,
           greedy: bool) -> mctx.PolicyOutput:
    """The config's search (`config.search`: muzero or gumbel) from observations `[B, *obs]`."""
    root_output = root(network, config.support_size, params, observation)
    recurrent_fn = make_recurrent_fn(network, config.support_size, config.gamma)
    invalid = invalid_actions(action_mask(observation))  # the root's illegal actions (deeper nodes: none known)
    if config.search == "gumbel":
        return mctx.gumbel_muzero_policy(
            params, key, root_output, recurrent_fn, config.num_simulations, invalid_actions=invalid,
            max_num_considered_actions=config.max_num_considered_actions,
            gumbel_scale=0.0 if greedy else config.gumbel_scale)
    return mctx.muzero_policy(
        params, key, root_output, recurrent_fn, config.num_simulations, invalid_actions=invalid,
        dirichlet_fraction=0.0 if greedy else config.dirichlet_fraction,
        dirichlet_alpha=config.dirichlet_alpha, temperature=0.0 if greedy else config.temperature)


def act(config: Any, network: MuZeroNetwork, params, actor_state, observation: Array, key: Array):
    """`Agent.act`: the searched action `[B]`; extras "policy" `[B, A]` (the search's action weights,
    the policy targets) and "search_value" `[B]` (the root value after search)."""
    out = without_varying_check(functools.partial(search, config, network, greedy=False), params, observation, key)
    extras = {"policy": out.action_weights.astype(jnp.float32), "search_value": out.search_tree.summary().value}
    return out.action.astype(jnp.int32), extras, actor_state


def act_greedy(config: Any, network: MuZeroNetwork, params, actor_state, observation: Array):
    """`Agent.act_greedy`: the search's action `[B]` without exploration noise (a fixed key)."""
    out = without_varying_check(functools.partial(search, config, network, greedy=True), params, observation,
                                jax.random.key(0))
    return out.action.astype(jnp.int32), actor_state
