"""Torsos (podrl.agents.torsos) and the ActorCritic built from them (podrl.agents.networks); no training."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dm_env import specs

from one_device import update_on_one_device
from podrl.agents.impala import ImpalaConfig
from podrl.agents.networks import make_network
from podrl.agents.ppo import PPOConfig
from podrl.agents.torsos import channels_first, make_torso
from podrl.core.errors import ConfigError
from podrl.core.types import Trajectory
from podrl.envs.types import EnvSpec

ATARI = (4, 84, 84)
MINATAR = (10, 10, 4)
CARTPOLE = EnvSpec(specs.Array((4,), np.float32), specs.DiscreteArray(2))
PENDULUM_LIKE = EnvSpec(specs.Array((3,), np.float32), specs.BoundedArray((1,), np.float32, -2.0, 2.0))


def _spec(obs_shape, dtype=np.float32, actions=6):
    return EnvSpec(specs.Array(obs_shape, dtype), specs.DiscreteArray(actions))


def _count(tree) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(tree)))


def _torso_params(torso, obs_shape, dtype=np.float32):
    module = make_torso(torso, obs_shape)
    shapes = jax.eval_shape(module.init, jax.random.key(0), jax.ShapeDtypeStruct((1,) + obs_shape, dtype))
    return module, shapes


# ------------------------------------------------------------------ torsos


@pytest.mark.parametrize("torso, obs_shape, features", [
    ("mlp", (4,), 64), ("nature_cnn", ATARI, 512), ("impala_resnet", ATARI, 256),
    ("minatar_cnn", MINATAR, 128), ("minatar_cnn", (10, 10), 128),
])
def test_torso_output_shapes(torso, obs_shape, features):
    module = make_torso(torso, obs_shape)
    x = jnp.zeros((2, 3) + obs_shape, jnp.float32)  # batch shape [2, 3]
    out = jax.eval_shape(lambda: module.init_with_output(jax.random.key(0), x)[0])
    assert out.shape == (2, 3, features) and out.dtype == jnp.float32


def test_param_counts_match_the_papers_layers():
    # Nature CNN on [4, 84, 84] (valid padding): conv1 4*8*8*32+32 = 8,224 -> [20, 20, 32];
    # conv2 32*4*4*64+64 = 32,832 -> [9, 9, 64]; conv3 64*3*3*64+64 = 36,928 -> [7, 7, 64];
    # dense 3136*512+512 = 1,606,144. Total 1,684,128.
    assert _count(_torso_params("nature_cnn", ATARI)[1]) == 8_224 + 32_832 + 36_928 + 1_606_144 == 1_684_128
    # IMPALA ResNet on [4, 84, 84]: stack 1: conv 4*9*16+16 = 592, 4 res convs 16*9*16+16 = 2,320 each;
    # stack 2: conv 16*9*32+32 = 4,640, 4 x 9,248; stack 3: conv 9,248, 4 x 9,248 -> [11, 11, 32];
    # dense 3872*256+256 = 991,488. Total 1,089,232.
    stacks = (592 + 4 * 2_320) + (4_640 + 4 * 9_248) + (9_248 + 4 * 9_248)
    assert _count(_torso_params("impala_resnet", ATARI)[1]) == stacks + 991_488 == 1_089_232
    # MinAtar CNN on [10, 10, 4]: conv 4*3*3*16+16 = 592 -> [8, 8, 16]; dense 1024*128+128 = 131,200.
    assert _count(_torso_params("minatar_cnn", MINATAR)[1]) == 592 + 131_200 == 131_792


@pytest.mark.parametrize("torso, obs_shape", [
    ("mlp", (7,)), ("nature_cnn", ATARI), ("impala_resnet", (4, 32, 32)), ("minatar_cnn", MINATAR)])
def test_uint8_is_scaled_to_unit_range_inside_the_torso(torso, obs_shape):
    module = make_torso(torso, obs_shape)
    pixels = jax.random.randint(jax.random.key(1), (3,) + obs_shape, 0, 256).astype(jnp.uint8)
    params = module.init(jax.random.key(0), pixels[:1])
    from_uint8 = module.apply(params, pixels)
    from_float = module.apply(params, pixels.astype(jnp.float32) / 255.0)
    np.testing.assert_array_equal(from_uint8, from_float)
    assert not np.allclose(from_uint8, module.apply(params, pixels.astype(jnp.float32)))


def test_layout_rule():
    assert channels_first(ATARI) and channels_first((4, 10, 10))
    assert not channels_first(MINATAR) and not channels_first((84, 84, 4))
    assert not channels_first((10, 10, 10))  # a tie reads as channels last (gymnax MinAtar Seaquest)
    assert not channels_first((32, 64, 64))  # more than 16 channels: not a frame stack


@pytest.mark.parametrize("torso, hwc", [("nature_cnn", (84, 84, 4)), ("minatar_cnn", (10, 10, 4)),
                                        ("impala_resnet", (20, 20, 3))])
def test_channels_first_and_last_give_the_same_output(torso, hwc):
    chw = (hwc[2], hwc[0], hwc[1])
    last, first = make_torso(torso, hwc), make_torso(torso, chw)
    x = jax.random.uniform(jax.random.key(2), (2,) + hwc)
    params = last.init(jax.random.key(0), x[:1])
    np.testing.assert_allclose(first.apply(params, jnp.transpose(x, (0, 3, 1, 2))), last.apply(params, x),
                               rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------ actor-critic


def _subtrees_named(tree, name) -> int:
    if not isinstance(tree, dict):
        return 0
    return sum((key == name) + _subtrees_named(value, name) for key, value in tree.items())


def test_shared_torso_has_one_torso_subtree_separate_has_two():
    spec = _spec(MINATAR)
    obs = jnp.zeros((1,) + MINATAR)
    shared = make_network(spec, (64,), "tanh", "minatar_cnn")  # None: shared for CNNs
    separate = make_network(spec, (64,), "tanh", "minatar_cnn", shared_torso=False)
    p_shared = shared.init(jax.random.key(0), obs)["params"]
    p_separate = separate.init(jax.random.key(0), obs)["params"]
    assert _subtrees_named(p_shared, "torso") == 1 and set(p_shared) == {"torso", "policy_head", "value_head"}
    assert _subtrees_named(p_separate, "torso") == 2 and set(p_separate) == {"actor", "critic"}
    heads = (128 * 6 + 6) + (128 + 1)
    assert _count(p_shared) == 131_792 + heads and _count(p_separate) == 2 * 131_792 + heads
    x = jax.random.uniform(jax.random.key(3), (5,) + MINATAR)
    for net, params in ((shared, {"params": p_shared}), (separate, {"params": p_separate})):
        logits, value = net.apply(params, x)
        assert logits.shape == (5, 6) and value.shape == (5,)
        np.testing.assert_array_equal(net.apply(params, x, method=type(net).value), value)


def test_shared_mlp_torso_and_continuous_heads():
    net = make_network(PENDULUM_LIKE, (32,), "relu", "mlp", shared_torso=True)
    params = net.init(jax.random.key(0), jnp.zeros((1, 3)))
    assert set(params["params"]) == {"torso", "policy_head", "value_head", "log_std"}
    (mean, log_std), value = net.apply(params, jnp.ones((4, 3)))
    assert mean.shape == (4, 1) and log_std.shape == (1,) and value.shape == (4,)


# The ActorCritic before torsos existed (agents/networks.py at e69218d), kept as the reference
# the default `mlp` network must reproduce bit for bit.
class _OldMLP(nn.Module):
    hidden_sizes: tuple
    output_size: int
    head_gain: float
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x):
        act = {"tanh": jnp.tanh, "relu": jax.nn.relu}[self.activation]
        for size in self.hidden_sizes:
            x = act(nn.Dense(size, kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)))(x))
        return nn.Dense(self.output_size, kernel_init=nn.initializers.orthogonal(self.head_gain))(x)


class _OldActorCritic(nn.Module):
    obs_shape: tuple
    action_shape: tuple
    num_actions: int
    discrete: bool
    hidden_sizes: tuple = (64, 64)
    activation: str = "tanh"

    def setup(self):
        self.actor = _OldMLP(self.hidden_sizes, self.num_actions, 0.01, self.activation)
        self.critic = _OldMLP(self.hidden_sizes, 1, 1.0, self.activation)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, self.action_shape)

    def __call__(self, observation):
        batch_shape = observation.shape[: observation.ndim - len(self.obs_shape)]
        x = observation.reshape(batch_shape + (-1,)).astype(jnp.float32)
        out, value = self.actor(x), self.critic(x)[..., 0]
        if self.discrete:
            return out, value
        return (out.reshape(out.shape[:-1] + self.action_shape), self.log_std), value


def _fingerprint(tree) -> np.ndarray:
    """Per leaf (in key order): its sum and its sum weighted by a ramp from -1 to 1 over its
    flattened values, in float64. Any change of initializer, of draw order or of layout moves
    these by orders more than the last-bit differences between CPUs (AMD and Intel machines
    draw the orthogonal init's QR and the tanh with different rounding)."""
    leaves = sorted(jax.tree_util.tree_flatten_with_path(tree)[0], key=lambda p: jax.tree_util.keystr(p[0]))
    rows = []
    for _, x in leaves:
        x = np.asarray(x, np.float64).ravel()
        rows.append((x.sum(), (x * np.linspace(-1.0, 1.0, x.size)).sum()))
    return np.array(rows)


# Fingerprints of the params and outputs of the code at e69218d (jax 0.10.2, CPU).
_CARTPOLE_PARAMS = [[0.0, 0.0], [1.963274, -2.084377], [0.0, 0.0], [-6.091521, 10.776133], [0.0, 0.0],
                    [-0.009304, -0.001027], [0.0, 0.0], [1.671442, 0.803899], [0.0, 0.0],
                    [10.259852, 2.970726], [0.0, 0.0], [1.250867, 0.561695]]
_CARTPOLE_OUT = [[0.001612, -0.003867], [-0.224052, -0.29148]]
_PENDULUM_PARAMS = [[0.0, 0.0], [-3.333626, -3.247763], [0.0, 0.0], [-0.007823, 0.002014], [0.0, 0.0],
                    [0.420061, 3.783651], [0.0, 0.0], [-0.279603, 0.390004], [0.0, 0.0]]
_PENDULUM_OUT = [[0.003973, 9.1e-05], [0.0, 0.0], [0.534657, 0.09602]]


@pytest.mark.parametrize("spec, hidden, act, old, fingerprints", [
    (CARTPOLE, (64, 64), "tanh", _OldActorCritic((4,), (), 2, True, (64, 64), "tanh"),
     (_CARTPOLE_PARAMS, _CARTPOLE_OUT)),
    (PENDULUM_LIKE, (32,), "relu", _OldActorCritic((3,), (1,), 1, False, (32,), "relu"),
     (_PENDULUM_PARAMS, _PENDULUM_OUT)),
])
def test_default_mlp_is_bit_identical_to_the_old_actor_critic(spec, hidden, act, old, fingerprints):
    new = make_network(spec, hidden, act)  # torso="mlp", shared_torso=None -> separate
    obs = jax.random.normal(jax.random.key(1), (5,) + spec.observation.shape)
    params = new.init(jax.random.key(0), obs[:1])
    old_params = old.init(jax.random.key(0), obs[:1])
    assert jax.tree.structure(params) == jax.tree.structure(old_params)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(old_params), strict=True):
        np.testing.assert_array_equal(a, b)
    out, old_out = new.apply(params, obs), old.apply(old_params, obs)
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(old_out), strict=True):
        np.testing.assert_array_equal(a, b)
    # The old module above is a transcription; the fingerprints tie it (and the new network) to
    # the values the code at e69218d drew. Bit-exact digests of them differed between this
    # project's AMD and Intel CPU machines, so they are compared to 1e-4 relative. Other jax
    # versions may draw other initial values (the comparison above holds on every version).
    if jax.__version__.startswith("0.10."):
        np.testing.assert_allclose(_fingerprint(params), fingerprints[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(_fingerprint(out), fingerprints[1], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------- config checks


@pytest.mark.parametrize("config_cls", [PPOConfig, ImpalaConfig])
def test_torso_that_cannot_read_the_observations_is_a_config_error(config_cls):
    with pytest.raises(ConfigError, match=r"^torso: .*\(4,\)") as err:
        config_cls(torso="nature_cnn").make_agent(CARTPOLE, 10)
    assert err.value.field == "torso"
    with pytest.raises(ConfigError, match=r"^torso: .*\(4, 84, 84\).*nature_cnn") as err:
        config_cls().make_agent(_spec(ATARI, np.uint8), 10)
    assert err.value.field == "torso"
    config_cls().make_agent(_spec(MINATAR, np.float32), 10)  # a small grid may be flattened (gymnax-blines)


@pytest.mark.parametrize("field, value", [("torso", "resnet50"), ("torso", None), ("shared_torso", "yes"),
                                          ("shared_torso", 1)])
def test_bad_network_fields(field, value):
    for config_cls in (PPOConfig, ImpalaConfig):
        with pytest.raises(ConfigError, match=f"^{field}: "):
            config_cls(**{field: value})


def test_both_configs_inherit_the_network_fields():
    for config_cls in (PPOConfig, ImpalaConfig):
        config = config_cls(torso="nature_cnn", shared_torso=False)
        assert (config.torso, config.shared_torso, config.hidden_sizes, config.activation) == \
            ("nature_cnn", False, (64, 64), "tanh")
        assert config_cls().torso == "mlp" and config_cls().shared_torso is None


# ------------------------------------------------------------------- smoke


def test_ppo_minatar_cnn_update_is_finite():
    spec = _spec(MINATAR, np.float32, actions=3)
    agent = PPOConfig(torso="minatar_cnn", num_epochs=1, num_minibatches=2).make_agent(spec, 10)
    state = agent.init(jax.random.key(0), spec)
    T, B = 4, 4
    keys = jax.random.split(jax.random.key(1), 5)
    obs = (jax.random.uniform(keys[0], (T, B) + MINATAR) > 0.8).astype(jnp.float32)
    action, extras, _ = jax.vmap(lambda o, k: agent.act(state.params, (), o, k))(obs, jax.random.split(keys[1], T))
    discount = (jax.random.uniform(keys[2], (T, B)) > 0.2).astype(jnp.float32)
    traj = Trajectory(obs, action, jax.random.normal(keys[3], (T, B)), discount,
                      jnp.zeros((T, B), bool), jnp.roll(obs, -1, axis=0), extras, ())
    new_state, metrics = update_on_one_device(agent)(state, traj, keys[4])
    assert int(new_state.update_step) == 1
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves((new_state.params, metrics)))
    pairs = zip(jax.tree.leaves(state.params), jax.tree.leaves(new_state.params))
    assert not all(np.array_equal(a, b) for a, b in pairs)
