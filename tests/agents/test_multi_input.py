"""The multi-input torso and the agents' pieces that carry nested observations (replay, obs normalisation).

`torso_input` picks one encoder per leaf (images a CNN, bounded integers an embedding, the rest an MLP,
the action mask none) and `torso_per_key` overrides it; `MultiInputTorso` runs them and concatenates.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs
from jax.sharding import PartitionSpec as P

import podrl.envs
from podrl.agents import AGENTS
from podrl.agents.config_checks import ENCODERS
from podrl.agents.dqn import DQNConfig
from podrl.agents.inputs import torso_input
from podrl.agents.obs_norm import init_observation_stats, normalize_observation, update_observation_stats
from podrl.agents.ppo import PPOConfig
from podrl.agents.replay import Transition, transitions
from podrl.agents.sac import SACConfig
from podrl.agents.torsos import EMBED_FEATURES, EmbedCNN, MinAtarCNN, ObservationInputs, make_torso
from podrl.core.errors import ConfigError
from podrl.core.mesh import data_mesh
from podrl.core.types import Trajectory
from podrl.envs import observations
from podrl.envs.types import EnvSpec

DICT_CUE = podrl.envs.env_spec(podrl.envs.make("DictCue-v0"))
BLACKJACK = EnvSpec((specs.DiscreteArray(32), specs.DiscreteArray(11), specs.DiscreteArray(2)), specs.DiscreteArray(2))
MASKED = EnvSpec({"board": specs.Array((3, 3), np.float32), "frame": specs.Array((84, 84, 4), np.uint8),
                  "action_mask": specs.Array((9,), bool)}, specs.DiscreteArray(9))


def encoders(inputs: ObservationInputs) -> dict[str, str]:
    return {leaf.key: leaf.encoder for leaf in inputs.leaves}


def test_each_leaf_gets_an_encoder_by_its_shape_and_dtype():
    assert encoders(torso_input(DICT_CUE, "mlp")) == {"image": "minatar_cnn", "noise": "mlp"}
    assert encoders(torso_input(BLACKJACK, "mlp")) == {"0": "embed", "1": "embed", "2": "embed"}
    assert [leaf.num_values for leaf in torso_input(BLACKJACK, "mlp").leaves] == [32, 11, 2]
    # a large frame gets the Nature CNN (or the config's CNN torso), the mask is not read
    assert encoders(torso_input(MASKED, "mlp")) == {"action_mask": "none", "board": "mlp", "frame": "nature_cnn"}
    assert encoders(torso_input(MASKED, "impala_resnet"))["frame"] == "impala_resnet"
    # a flat observation keeps its shape (the networks of today)
    flat = EnvSpec(specs.Array((4,), np.float32), specs.DiscreteArray(2))
    assert torso_input(flat, "mlp") == (4,)


def test_torso_per_key_overrides_and_bad_choices_name_the_key():
    inputs = torso_input(MASKED, "mlp", ("action_mask=mlp", "frame=minatar_cnn"))
    assert encoders(inputs) == {"action_mask": "mlp", "board": "mlp", "frame": "minatar_cnn"}
    cases = {("nope=mlp",): "its keys are ['action_mask', 'board', 'frame']",
             ("board=embed",): "board=embed needs an integer leaf with bounds",
             ("action_mask=nature_cnn",): "leaf 'action_mask' (shape (9,))",
             ("frame=mlp",): "leaf 'frame' (shape (84, 84, 4))",
             ("board=none", "frame=none"): "reads no leaf"}
    for per_key, message in cases.items():
        with pytest.raises(ConfigError, match="torso_per_key") as info:
            torso_input(MASKED, "mlp", per_key)
        assert message in str(info.value), (per_key, str(info.value))
    with pytest.raises(ConfigError, match="no keys"):
        torso_input(EnvSpec(specs.Array((4,), np.float32), specs.DiscreteArray(2)), "mlp", ("x=mlp",))


def test_the_config_field_is_checked_and_reaches_the_network():
    for bad in (("image",), ("image=cnn",), ("image=mlp", "image=embed"), "image=mlp"):
        with pytest.raises(ConfigError, match="torso_per_key"):
            PPOConfig(torso_per_key=bad)
    assert set(ENCODERS) >= {"mlp", "embed", "none", "minatar_cnn"}
    # the Q network's torso reads the image with the encoder named, here an MLP on its 16 pixels
    agent = DQNConfig(torso_per_key=("image=mlp",), hidden_sizes=(8,)).make_agent(DICT_CUE, 1)
    params = agent.init(jax.random.key(0), DICT_CUE).params["network"]["params"]["torso"]
    assert set(params) == {"input_image", "input_noise"}
    assert params["input_image"]["Dense_0"]["kernel"].shape == (16, 8)


PER_KEY_AGENTS = sorted(name for name, entry in AGENTS.items()
                        if "torso_per_key" in {field.name for field in dataclasses.fields(entry.config)})


def image_kernels(config) -> dict[str, tuple[int, ...]]:
    """The kernels (path -> shape) of every encoder of DictCue's 4x4 `image` leaf in the agent's params."""
    state = config.make_agent(DICT_CUE, 1).init(jax.random.key(0), DICT_CUE)
    leaves = jax.tree_util.tree_leaves_with_path(state.params)
    return {jax.tree_util.keystr(path): leaf.shape for path, leaf in leaves
            if "input_image" in jax.tree_util.keystr(path) and "kernel" in jax.tree_util.keystr(path)}


@pytest.mark.parametrize("name", PER_KEY_AGENTS)
def test_every_agents_torso_per_key_reaches_its_network(name):
    """Each agent with the field builds the encoder it names: by default DictCue's image gets the MinAtar CNN
    (a conv kernel), with `image=mlp` a Dense layer on its 16 pixels and no conv anywhere."""
    assert set(PER_KEY_AGENTS) >= {"ppo", "impala", "pqn", "dqn", "muzero", "r2d2"}
    config = AGENTS[name].config
    default = image_kernels(config())
    assert any("Conv_0" in path for path in default), default
    per_key = image_kernels(config(torso_per_key=("image=mlp",)))
    assert per_key and not any("Conv" in path for path in per_key), per_key
    first = [shape for path, shape in per_key.items() if "Dense_0" in path]
    assert first and all(shape[0] == 16 for shape in first), per_key


def test_multi_input_torso_concatenates_its_encoders_and_scales_pixels_inside():
    inputs = torso_input(DICT_CUE, "mlp")
    torso = make_torso("mlp", inputs, hidden_sizes=(8,), activation="relu")
    obs = observations.zeros(DICT_CUE.observation, (5,))
    obs = {"image": obs["image"].at[:, :2, :2].set(255), "noise": obs["noise"] + 0.5}
    params = torso.init(jax.random.key(0), obs)
    features = torso.apply(params, obs)
    assert features.shape == (5, 128 + 8)  # the MinAtar CNN's 128, the noise MLP's 8
    # the image part is the MinAtar CNN on the image scaled to [0, 1]
    cnn = MinAtarCNN((4, 4, 1))
    alone = cnn.apply({"params": params["params"]["input_image"]}, obs["image"].astype(jnp.float32) / 255.0)
    np.testing.assert_allclose(features[:, :128], alone, rtol=1e-6)
    # a batch of batches `[T, B, ...]` reads the same
    stacked = jax.tree.map(lambda x: jnp.stack([x, x]), obs)
    np.testing.assert_allclose(torso.apply(params, stacked)[1], features, rtol=1e-6)


def test_an_embedded_leaf_reads_the_row_of_its_value():
    spec = EnvSpec({"card": specs.BoundedArray((), np.int32, 1, 10)}, specs.DiscreteArray(2))
    inputs = torso_input(spec, "mlp")
    assert inputs.leaves[0].num_values == 10 and inputs.leaves[0].offset == 1
    torso = make_torso("mlp", inputs)
    card = jnp.array([1, 7, 10], jnp.int32)
    params = torso.init(jax.random.key(0), {"card": card})
    table = params["params"]["input_card"]["embedding"]
    assert table.shape == (10, EMBED_FEATURES)
    np.testing.assert_array_equal(torso.apply(params, {"card": card}), table[card - 1])


GRID = EnvSpec({"grid": specs.BoundedArray((5, 5, 2), np.uint8, 0, 12),
                "frame": specs.BoundedArray((4, 4, 1), np.uint8, 0, 255)}, specs.DiscreteArray(6))
"""xland-minigrid's view: a grid of (tile, colour) ids; beside it a uint8 frame, whose 256 values are pixels."""


def test_an_integer_grid_of_ids_is_embedded_then_convolved():
    """`embed_cnn`: each id's row of one table, a cell's two rows side by side `[5, 5, 32]`, then the MinAtar
    CNN's layers; the same grid channels-first reads the same."""
    inputs = torso_input(GRID, "minatar_cnn")
    assert encoders(inputs) == {"frame": "minatar_cnn", "grid": "embed_cnn"}
    assert inputs.leaves[1].num_values == 13
    torso = make_torso("mlp", inputs, hidden_sizes=(8,))
    ids = np.random.default_rng(0).integers(0, 13, (3, 5, 5, 2)).astype(np.uint8)
    obs = {"frame": np.zeros((3, 4, 4, 1), np.uint8), "grid": ids}
    params = torso.init(jax.random.key(0), obs)
    features = torso.apply(params, obs)
    grid = params["params"]["input_grid"]
    table = grid["Embed_0"]["embedding"]
    assert table.shape == (13, EMBED_FEATURES) and features.shape == (3, 128 + 128)
    embedded = np.asarray(table)[ids].reshape(3, 5, 5, 2 * EMBED_FEATURES)
    cnn = {"params": {"Conv_0": grid["Conv_0"], "Dense_0": grid["Dense_0"]}}
    np.testing.assert_allclose(features[:, 128:], MinAtarCNN((5, 5, 32)).apply(cnn, embedded), rtol=1e-5, atol=1e-6)
    first = EmbedCNN((2, 5, 5), 13).apply({"params": grid}, ids.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(first, features[:, 128:], rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError, match="noise=embed_cnn needs an integer leaf with bounds"):
        torso_input(DICT_CUE, "mlp", ("noise=embed_cnn",))
    card = EnvSpec({"card": specs.BoundedArray((3,), np.int32, 1, 10)}, specs.DiscreteArray(2))
    with pytest.raises(ConfigError, match=r"card=embed_cnn needs a grid \[H, W\]"):
        torso_input(card, "mlp", ("card=embed_cnn",))


def test_observation_normalisation_keeps_statistics_per_float_leaf():
    """Float leaves are standardised by their own running moments (NumPy's over the batch); the uint8
    image passes unchanged and has no statistics."""
    stats = init_observation_stats(DICT_CUE.observation)
    assert set(stats) == {"noise"}
    rng = np.random.default_rng(0)
    batch = {"image": rng.integers(0, 256, (6, 5, 4, 4, 1)).astype(np.uint8),
             "noise": rng.normal(3.0, 2.0, (6, 5, 2)).astype(np.float32)}
    mesh = data_mesh(jax.devices()[:1])
    update = jax.jit(jax.shard_map(update_observation_stats, mesh=mesh, in_specs=(P(), P()), out_specs=P()))
    stats = update(stats, batch)
    np.testing.assert_allclose(stats["noise"].mean, batch["noise"].reshape(-1, 2).mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats["noise"].var, batch["noise"].reshape(-1, 2).var(0), rtol=1e-4)
    normalised = normalize_observation(stats, batch, clip=10.0)
    np.testing.assert_array_equal(normalised["image"], batch["image"])
    expected = (batch["noise"] - stats["noise"].mean) / np.sqrt(stats["noise"].var + 1e-8)
    np.testing.assert_allclose(normalised["noise"], expected, rtol=1e-4, atol=1e-5)


def test_n_step_transitions_gather_every_leaf_of_the_bootstrap_observation():
    """`replay.transitions` of a dict-observation trajectory: each leaf of o_{t+m} from the step the n-step
    return stops at (an episode end cuts it), as for a flat observation."""
    t, b = 4, 2
    code = np.arange(t * b, dtype=np.float32).reshape(t, b)  # step (t, b) carries t * B + b
    obs = {"x": code[..., None], "mask": (code[..., None] % 2 == 0) & np.ones((t, b, 3), bool)}
    next_obs = jax.tree.map(lambda x: x + 100 if x.dtype != bool else ~x, obs)
    discount = np.ones((t, b), np.float32)
    discount[1, 0] = 0.0  # env 0's episode ends after step 1
    traj = Trajectory(obs, np.zeros((t, b), np.int32), np.ones((t, b), np.float32), discount, np.zeros((t, b), bool),
                      next_obs, {}, ())
    out = transitions(traj, n=2, gamma=0.5)
    assert isinstance(out, Transition) and out.next_observation["x"].shape == (t * b, 1)
    last = np.array([[1, 1], [1, 2], [3, 3], [3, 3]])  # min(t + 1, T - 1), cut after env 0's step 1
    expected = {key: np.stack([leaf[last[i, j], j] for i in range(t) for j in range(b)])
                for key, leaf in next_obs.items()}
    for key in expected:
        np.testing.assert_array_equal(out.next_observation[key], expected[key], err_msg=key)


def test_continuous_agents_read_a_dict_observation():
    """SAC's actor reads each leaf with its own MLP; its twin critics the leaves flattened and concatenated
    with the action (2 + 3 observation values + 2 action values)."""
    spec = EnvSpec({"goal": specs.Array((2,), np.float32), "position": specs.Array((3,), np.float32)},
                   specs.BoundedArray((2,), np.float32, -1.0, 1.0))
    agent = SACConfig(hidden_sizes=(8,)).make_agent(spec, 10)
    state = agent.init(jax.random.key(0), spec)
    assert set(state.params["actor"]["params"]["torso"]) == {"input_goal", "input_position"}
    assert state.opt_state.critic["params"]["q0"]["Dense_0"]["kernel"].shape == (7, 8)
    action, _, _ = agent.act(state.params, (), observations.zeros(spec.observation, (4,)), jax.random.key(1))
    assert action.shape == (4, 2) and np.all(np.abs(np.asarray(action)) <= 1.0)
