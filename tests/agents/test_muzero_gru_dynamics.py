"""MuZero's `dynamics="gru"` model (Stoix's ff_mz world model): the state is the stacked GRU cells' carries,
each step sees the state scaled to [-1, 1] plus a residual, the reward comes from an MLP over the top cell,
the representation is not scaled; the default `mlp` model is unchanged; an update runs with it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from one_device import update_on_one_device
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero.agent import make_network
from podrl.agents.muzero.losses import unroll
from podrl.agents.muzero.networks import MuZeroNetwork, scale_hidden_state
from podrl.core.errors import ConfigError
from podrl.core.types import Trajectory
from podrl.envs.registry import make
from podrl.envs.types import env_spec

SPEC = env_spec(make("MatchCue-v0"))  # observations [4], 4 actions
GRU = dict(hidden_sizes=(8,), latent_size=12, dynamics="gru", dynamics_sizes=(5, 7), prediction_sizes=(6,),
           support_size=5, unroll_steps=2, td_steps=2, num_simulations=4, batch_size=4)


def init(config: MuZeroConfig):
    network = make_network(config, SPEC)
    params = network.init(jax.random.key(0), jnp.zeros((3, 4)), jnp.zeros((3,), jnp.int32))
    return network, params


def test_the_gru_state_is_the_cells_carries_over_the_scaled_state():
    network, params = init(MuZeroConfig(**GRU))
    cells = params["params"]
    assert [cells[f"cells_{i}"]["hn"]["kernel"].shape[-1] for i in range(2)] == [5, 7]  # one GRU cell per width
    assert "dynamics_mlp" not in cells and "reward_mlp" in cells and "action_embedding" in cells
    obs = jax.random.normal(jax.random.key(1), (3, 4))
    state = network.apply(params, obs, method=MuZeroNetwork.represent)
    assert state.shape == (3, 12) and float(jnp.max(state)) != 1.0  # not min-max scaled
    action = jnp.array([0, 1, 3], jnp.int32)
    next_state, reward_logits = network.apply(params, state, action, method=MuZeroNetwork.dynamics)
    assert next_state.shape == (3, 12) and reward_logits.shape == (3, 11)
    # the step sees the state only through its [-1, 1] scaling: an affine change of it changes nothing
    moved, moved_reward = network.apply(params, 3.0 * state - 2.0, action, method=MuZeroNetwork.dynamics)
    np.testing.assert_allclose(moved, next_state, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(moved_reward, reward_logits, rtol=1e-5, atol=1e-5)
    # the residual: next state = the new carries (each in (-1, 1), a GRU's) + the scaled state
    carries = next_state - (scale_hidden_state(state) * 2.0 - 1.0)
    assert float(jnp.max(jnp.abs(carries))) < 1.0
    # the action matters
    other, _ = network.apply(params, state, (action + 1) % 4, method=MuZeroNetwork.dynamics)
    assert not np.allclose(other, next_state)


def test_the_default_mlp_model_keeps_its_parameters():
    _, params = init(MuZeroConfig(**{**GRU, "dynamics": "mlp", "latent_size": 8, "dynamics_sizes": (8,)}))
    assert set(params["params"]) == {"torso_net", "latent", "dynamics_mlp", "next_state", "reward_head",
                                     "prediction_mlp", "policy_head", "value_head"}


def test_an_update_with_the_gru_model_unrolls_and_learns_from_the_replay():
    t, b = 8, 4
    config = MuZeroConfig(**GRU, buffer_size=t * b, min_fill=t * b, replay_ratio=3 / (t * b))  # 3 gradient steps
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    obs = jax.nn.one_hot(jax.random.randint(jax.random.key(1), (t + 1, b), 0, 4), 4)
    ones = jnp.ones((t, b), jnp.float32)
    traj = Trajectory(obs[:-1], jnp.zeros((t, b), jnp.int32), ones, ones, jnp.zeros((t, b), bool), obs[1:],
                      {"policy": jnp.full((t, b, 4), 0.25), "search_value": jnp.zeros((t, b))}, ())
    after, metrics = update_on_one_device(agent)(state, traj, jax.random.key(2))
    assert float(metrics["learning"]) == 1.0 and np.isfinite(float(metrics["reward_loss"]))
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), after.params, state.params)
    # the heads start at zero, so the first step moves only them; the next ones reach every cell of the stack
    assert all(any(jax.tree.leaves(moved["params"][name])) for name in ("cells_0", "cells_1", "action_embedding",
                                                                        "reward_mlp")), moved["params"]
    network = make_network(config, SPEC)
    policy, value, reward = unroll(network, after.params, obs[0, :3], jnp.zeros((3, 2), jnp.int32))
    assert policy.shape == (3, 3, 4) and value.shape == (3, 3, 11) and reward.shape == (2, 3, 11)


@pytest.mark.parametrize("change", [dict(latent_size=13), dict(dynamics_sizes=())])
def test_gru_widths_that_do_not_make_the_state_are_refused_naming_the_field(change):
    with pytest.raises(ConfigError) as info:
        MuZeroConfig(**{**GRU, **change})
    assert info.value.field == "dynamics_sizes" and "latent_size" in str(info.value)


def test_an_unknown_dynamics_is_refused_naming_the_field():
    with pytest.raises(ConfigError) as info:
        MuZeroConfig(dynamics="lstm")
    assert info.value.field == "dynamics" and "gru" in str(info.value)
