"""MuZero acts with its config's search: the agent's `act` gives the actions and the policy targets (action
weights) that mctx gives when called by hand with the same model, params, observations and key and the
config's settings written out (Gumbel MuZero: simulations, considered actions, Gumbel scale; MuZero:
simulations, Dirichlet noise, temperature; both: the discount and the support), each set apart from its
default (`tools/check_mutations.py --fields`)."""

from __future__ import annotations

import jax
import mctx
import numpy as np
import pytest

import podrl.envs
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero.agent import make_network
from podrl.agents.muzero.search import make_recurrent_fn, root

SPEC = podrl.envs.env_spec(podrl.envs.make("MatchCue-v0"))  # observations [4], 4 actions
SMALL = dict(hidden_sizes=(8,), latent_size=8, dynamics_sizes=(8,), prediction_sizes=(8,), support_size=4,
             gamma=0.9)
SETTINGS = {
    "gumbel": dict(num_simulations=6, max_num_considered_actions=2, gumbel_scale=0.5),
    "muzero": dict(num_simulations=6, dirichlet_alpha=0.7, dirichlet_fraction=0.6, temperature=0.4),
}


def by_hand(kind: str, network, params, observation, key):
    """mctx's policy with the settings written out (not read from a config)."""
    root_output = root(network, 4, params, observation)
    recurrent_fn = make_recurrent_fn(network, 4, 0.9)
    s = SETTINGS[kind]
    if kind == "gumbel":
        return mctx.gumbel_muzero_policy(params, key, root_output, recurrent_fn, s["num_simulations"],
                                         max_num_considered_actions=s["max_num_considered_actions"],
                                         gumbel_scale=s["gumbel_scale"])
    return mctx.muzero_policy(params, key, root_output, recurrent_fn, s["num_simulations"],
                              dirichlet_fraction=s["dirichlet_fraction"], dirichlet_alpha=s["dirichlet_alpha"],
                              temperature=s["temperature"])


@pytest.mark.parametrize("kind", ["gumbel", "muzero"])
def test_muzero_acts_with_the_configs_search(kind):
    config = MuZeroConfig(**SMALL, search=kind, **SETTINGS[kind])
    defaults = MuZeroConfig()
    assert all(getattr(defaults, k) != v for k, v in {**SMALL, **SETTINGS[kind]}.items() if k != "hidden_sizes")
    agent = config.make_agent(SPEC, 10)
    params = agent.init(jax.random.key(0), SPEC).params
    keys = jax.random.split(jax.random.key(3), len(jax.tree.leaves(params)))  # heads start at zero kernels
    params = jax.tree.unflatten(jax.tree.structure(params), [x + 0.5 * jax.random.normal(k, x.shape, x.dtype)
                                                             for x, k in zip(jax.tree.leaves(params), keys)])
    observation = jax.nn.one_hot(np.arange(32) % 4, 4)
    action, extras, _ = agent.act(params, (), observation, jax.random.key(5))
    want = by_hand(kind, make_network(config, SPEC), params, observation, jax.random.key(5))
    np.testing.assert_array_equal(np.asarray(action), np.asarray(want.action))
    np.testing.assert_allclose(np.asarray(extras["policy"]), np.asarray(want.action_weights), rtol=1e-5, atol=1e-6)
