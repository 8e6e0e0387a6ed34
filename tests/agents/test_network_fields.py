"""Every agent's network is its config's: the network each agent's update (or acting) uses, taken from the
agent as built, computes what a network built by hand from the same architecture computes, on the hand-built
network's params (a width the agent read at its default would not fit them, an activation or a layer norm
would change the outputs). Values are set apart from the defaults (`tools/check_mutations.py --fields`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrl.envs
from podrl.agents.continuous import TwinCritic
from podrl.agents.dqn import DQNConfig
from podrl.agents.impala import ImpalaConfig
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero import agent as muzero_agent
from podrl.agents.muzero.networks import MuZeroNetwork
from podrl.agents.networks import make_network
from podrl.agents.ppo import PPOConfig
from podrl.agents.pqn import PQNConfig
from podrl.agents.q_learning import QNetwork
from podrl.agents.r2d2 import R2D2Config
from podrl.agents.r2d2 import agent as r2d2_agent
from podrl.agents.r2d2.networks import RecurrentQNetwork
from podrl.agents.sac import SACConfig
from podrl.agents.td3 import TD3Config
from podrl.core.errors import ConfigError

CARTPOLE = podrl.envs.env_spec(podrl.envs.make("CartPole-v1"))  # observations [4], 2 actions
REACH = podrl.envs.env_spec(podrl.envs.make("ReachCue-v0"))  # observations [4], actions a box [1]
RECALL = podrl.envs.env_spec(podrl.envs.make("RecallCue-v0"))  # observations [3], 2 actions
WIDTHS = (12, 6)


def other_activation(cls) -> str:
    return "gelu" if cls().activation in ("relu", "tanh") else "relu"


def same_outputs(network, reference, *inputs) -> None:
    """`network` applied to `reference`'s initialised params, every leaf perturbed (some heads start with
    zero kernels, whose outputs would not depend on the layers below), gives `reference`'s outputs."""
    params = reference.init(jax.random.key(0), *inputs)
    keys = jax.random.split(jax.random.key(2), len(jax.tree.leaves(params)))
    params = jax.tree.unflatten(jax.tree.structure(params), [x + 0.5 * jax.random.normal(k, x.shape, x.dtype)
                                                             for x, k in zip(jax.tree.leaves(params), keys)])
    for got, want in zip(jax.tree.leaves(network.apply(params, *inputs)),
                         jax.tree.leaves(reference.apply(params, *inputs)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


OBS4 = jax.random.normal(jax.random.key(1), (5, 4))


@pytest.mark.parametrize("cls", [PPOConfig, ImpalaConfig])
def test_the_actor_critics_network_is_the_configs(cls):
    config = cls(hidden_sizes=WIDTHS, activation=other_activation(cls), shared_torso=True)
    network = config.make_agent(CARTPOLE, 10).update.args[0].network  # `functools.partial(update, parts)`
    same_outputs(network, make_network(CARTPOLE, WIDTHS, config.activation, "mlp", True), OBS4)


@pytest.mark.parametrize("cls", [PQNConfig, DQNConfig])
def test_the_q_networks_are_the_configs(cls):
    config = cls(hidden_sizes=WIDTHS, activation=other_activation(cls), layer_norm=not cls().layer_norm)
    network = config.make_agent(CARTPOLE, 10).update.args[0].network
    same_outputs(network, QNetwork((4,), 2, "mlp", WIDTHS, config.activation, config.layer_norm), OBS4)


def test_r2d2s_recurrent_network_is_the_configs():
    config = R2D2Config(hidden_sizes=WIDTHS, activation=other_activation(R2D2Config), layer_norm=True, core="gru",
                        core_size=10, dueling=False, head_hidden=7)
    network = r2d2_agent.make_parts(config, RECALL, 10).network
    reference = RecurrentQNetwork((3,), 2, "mlp", WIDTHS, config.activation, True, "gru", 10, False, 7)
    same_outputs(network, reference, OBS4[:, :3])


def test_muzeros_model_is_the_configs():
    config = MuZeroConfig(hidden_sizes=WIDTHS, activation=other_activation(MuZeroConfig), layer_norm=True,
                          support_size=4, latent_size=11, dynamics_sizes=(5, 6), prediction_sizes=(13,), dynamics="gru")
    network = muzero_agent.make_parts(config, CARTPOLE, 10).network
    reference = MuZeroNetwork((4,), 2, 4, "mlp", WIDTHS, config.activation, True, 11, (5, 6), (13,), "gru")
    same_outputs(network, reference, OBS4, jnp.zeros((5,), jnp.int32))


@pytest.mark.parametrize("cls", [SACConfig, TD3Config])
def test_the_continuous_critics_are_the_configs(cls):
    config = cls(hidden_sizes=WIDTHS, activation=other_activation(cls))
    parts = config.make_agent(REACH, 10).act.args[0]  # `functools.partial(act, parts)`
    same_outputs(parts.critic, TwinCritic((4,), 1, WIDTHS, config.activation), OBS4, jnp.ones((5, 1)))


@pytest.mark.parametrize("cls", [PPOConfig, ImpalaConfig, PQNConfig, DQNConfig, MuZeroConfig, R2D2Config])
def test_a_torso_that_cannot_read_the_observations_is_refused_naming_it(cls):
    """The config's torso is the one built: a Nature CNN cannot read CartPole's 4 floats (the default mlp can)."""
    spec = RECALL if cls is R2D2Config else CARTPOLE
    with pytest.raises(ConfigError) as info:
        cls(torso="nature_cnn").make_agent(spec, 10)
    assert info.value.field == "torso"
