"""Torsos: observations `[..., *obs_shape]` -> features `[..., F]`, shared by the actor-critic agents.

An agent config names its torso (`torso`, one of `TORSOS` in `podrl.agents.config_checks`):

- `mlp`: flatten, then Dense + activation per `hidden_sizes` (the CleanRL / PureJaxRL MLP), with
  `layer_norm` a LayerNorm between each Dense and its activation (PQN, Gallici et al. 2024);
- `nature_cnn`: Mnih et al. 2015 ("Human-level control through deep reinforcement
  learning", Nature 518): conv 32 8x8 s4, conv 64 4x4 s2, conv 64 3x3 s1, dense 512, ReLU;
  1,684,128 params on `[4, 84, 84]` frames, F = 512;
- `impala_resnet`: Espeholt et al. 2018 (IMPALA, arXiv:1802.01561, Fig. 3 "large"
  network): 3 stacks of 16/32/32 channels, each conv 3x3 + max-pool 3x3 s2 + 2 residual
  blocks (ReLU, conv 3x3, ReLU, conv 3x3, + skip), then ReLU, dense 256, ReLU;
  F = 256;
- `minatar_cnn`: Young & Tian 2019 (MinAtar, arXiv:1903.03176): conv 16 3x3 s1 (valid),
  ReLU, dense 128, ReLU; F = 128.

The CNN torsos are the papers' fixed architectures (ReLU; `hidden_sizes` and `activation`
configure the `mlp` torso only). All layers use orthogonal init with gain sqrt(2), zero biases.
Their convolutions are `podrl.agents.conv.Conv` (`flax.linen.Conv`'s parameters), whose gradient
avoids XLA:CPU's slow convolution gradients inside the learners' loops (see `podrl.agents.conv`).

Nested observations (dicts, tuples: `podrl.envs.observations`) go through `MultiInputTorso`: one encoder per
leaf (an MLP of `hidden_sizes`, one of the CNNs above, an embedding of an integer leaf, or none), chosen
by `podrl.agents.inputs` from the leaf's shape and dtype and the config's `torso_per_key`, their outputs
concatenated; `make_torso` builds it when given the `ObservationInputs` that module describes them with.

Pixels: observations of dtype uint8 are cast to float32 and scaled to [0, 1] here, inside the
network (they travel as uint8 everywhere else); bool (gymnax MinAtar) and other dtypes are cast
to float32 unscaled. CNN torsos take rank-2 `[H, W]` or rank-3 observations in either layout,
decided by `channels_first(obs_shape)`: `[C, H, W]` (the ALE adapter's `[4, 84, 84]` frame
stack) when the first dim is at most 16 and smaller than both others, else `[H, W, C]` (gymnax
MinAtar's `[10, 10, C]`); channels-first input is transposed to NHWC inside.
"""

from __future__ import annotations

import math
import re
from typing import Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from podrl.agents.config_checks import PIXEL_TORSOS
from podrl.agents.conv import Conv
from podrl.core.errors import ConfigError
from podrl.envs.observations import keyed_leaves

Array = jax.Array

ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "silu": jax.nn.silu,
    "elu": jax.nn.elu,
}

_RELU_INIT = nn.initializers.orthogonal(math.sqrt(2.0))


def to_float(x: Array) -> Array:
    """float32 `x`; uint8 scaled by 1/255 to [0, 1]."""
    if x.dtype == jnp.uint8:
        return x.astype(jnp.float32) / 255.0
    return x.astype(jnp.float32)


def channels_first(obs_shape: Sequence[int]) -> bool:
    """True if a rank-3 `obs_shape` is `[C, H, W]`: C <= 16 and smaller than H and W."""
    return len(obs_shape) == 3 and obs_shape[0] <= 16 and obs_shape[0] < min(obs_shape[1:])


MLP_MAX_IMAGE_INPUTS = 4096
"""Image observations up to this many values may go to an `mlp` flattened (MinAtar: 400 to 1,000)."""


def check_torso(torso: str, obs_shape: Sequence[int]) -> None:
    """ConfigError("torso") if `torso` cannot read observations of `obs_shape`.

    CNN torsos need images (rank 2 `[H, W]` or rank 3); an `mlp` on rank >= 3 observations of
    more than `MLP_MAX_IMAGE_INPUTS` values would flatten whole frames into its first layer
    (millions of weights on raw pixels). Small grids such as MinAtar's `[10, 10, C]` may be
    flattened, as gymnax-blines' MinAtar PPO does.
    """
    shape = tuple(int(d) for d in obs_shape)
    if torso in PIXEL_TORSOS and len(shape) not in (2, 3):
        raise ConfigError(
            "torso", f"{torso!r} needs image observations [C, H, W], [H, W, C] or [H, W], but this "
            f"environment's observations have shape {shape}; use --agent.torso mlp")
    if torso == "mlp" and len(shape) >= 3 and math.prod(shape) > MLP_MAX_IMAGE_INPUTS:
        raise ConfigError(
            "torso", f"'mlp' on image observations of shape {shape} flattens {math.prod(shape):,} pixels "
            f"into the first dense layer, which is absurd; use a CNN torso: --agent.torso nature_cnn (Atari), "
            f"minatar_cnn (MinAtar) or impala_resnet")


def _images(x: Array, obs_shape: tuple[int, ...]) -> tuple[Array, tuple[int, ...]]:
    """`x [..., *obs_shape]` as float NHWC images `[N, H, W, C]`, and the batch shape `[...]`."""
    batch_shape = x.shape[: x.ndim - len(obs_shape)]
    x = to_float(x).reshape((-1,) + obs_shape)
    if len(obs_shape) == 2:
        x = x[..., None]
    elif channels_first(obs_shape):
        x = jnp.transpose(x, (0, 2, 3, 1))
    return x, batch_shape


def mlp_layers(x: Array, hidden_sizes: Sequence[int], activation: str, layer_norm: bool = False) -> Array:
    """Dense (+ LayerNorm if `layer_norm`) + activation per width, created in the calling compact
    module's scope (so the layers are that module's `Dense_0`, `Dense_1`, ... — the parameter
    names of the original `MLP`, kept bit-identical; LayerNorms add `LayerNorm_0`, ...)."""
    act = ACTIVATIONS[activation]
    for size in hidden_sizes:
        x = nn.Dense(size, kernel_init=_RELU_INIT)(x)
        x = act(nn.LayerNorm()(x) if layer_norm else x)
    return x


def flatten_obs(x: Array, obs_shape: tuple[int, ...]) -> Array:
    """`[..., *obs_shape]` -> float `[..., prod(obs_shape)]`; a nested observation (`obs_shape` its
    `ObservationInputs`): its encoded leaves so flattened and concatenated in key order."""
    if isinstance(obs_shape, ObservationInputs):
        leaves = keyed_leaves(x)
        return jnp.concatenate([flatten_obs(leaves[leaf.key], leaf.shape) for leaf in obs_shape.encoded], axis=-1)
    batch_shape = x.shape[: x.ndim - len(obs_shape)]
    return to_float(x.reshape(batch_shape + (-1,)))


class MLPTorso(nn.Module):
    """`[..., *obs_shape]` -> `[..., hidden_sizes[-1]]` (the flattened obs if no hidden layers)."""

    obs_shape: tuple[int, ...]
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    layer_norm: bool = False  # LayerNorm after each hidden Dense, before the activation (PQN)

    @nn.compact
    def __call__(self, x: Array) -> Array:
        return mlp_layers(flatten_obs(x, self.obs_shape), self.hidden_sizes, self.activation, self.layer_norm)


def _conv(features: int, kernel: int, stride: int = 1, padding: str = "VALID") -> Conv:
    return Conv(features, kernel, stride, padding, kernel_init=_RELU_INIT)


def _dense_out(x: Array, batch_shape: tuple[int, ...], size: int, layer_norm: bool = False) -> Array:
    x = nn.Dense(size, kernel_init=_RELU_INIT)(x.reshape(x.shape[0], -1))
    x = jax.nn.relu(nn.LayerNorm()(x) if layer_norm else x)
    return x.reshape(batch_shape + (size,))


class NatureCNN(nn.Module):
    """Mnih et al. 2015 (Nature 518:529): `[..., *obs_shape]` -> `[..., 512]`.

    On `[4, 84, 84]`: conv 8x8 s4 -> `[20, 20, 32]`, 4x4 s2 -> `[9, 9, 64]`,
    3x3 s1 -> `[7, 7, 64]`, flatten 3136, dense 512; all valid padding, ReLU.
    """

    obs_shape: tuple[int, ...]
    layer_norm: bool = False  # LayerNorm after the dense layer, before its ReLU

    @nn.compact
    def __call__(self, x: Array) -> Array:
        x, batch_shape = _images(x, self.obs_shape)
        x = jax.nn.relu(_conv(32, 8, 4)(x))
        x = jax.nn.relu(_conv(64, 4, 2)(x))
        x = jax.nn.relu(_conv(64, 3, 1)(x))
        return _dense_out(x, batch_shape, 512, self.layer_norm)


class _ResidualBlock(nn.Module):
    """x + conv(relu(conv(relu(x)))), 3x3 same-padded convs keeping the channels."""

    @nn.compact
    def __call__(self, x: Array) -> Array:
        channels = x.shape[-1]
        y = _conv(channels, 3, padding="SAME")(jax.nn.relu(x))
        y = _conv(channels, 3, padding="SAME")(jax.nn.relu(y))
        return x + y


class ImpalaResNet(nn.Module):
    """Espeholt et al. 2018 (arXiv:1802.01561, Fig. 3): `[..., *obs_shape]` -> `[..., 256]`.

    Each of 3 stacks (16, 32, 32 channels): conv 3x3 same, max-pool 3x3 s2 same (halves H
    and W, rounding up), 2 residual blocks. On `[4, 84, 84]`: `[42, 42, 16]`, `[21, 21, 32]`,
    `[11, 11, 32]`; then ReLU, flatten 3872, dense 256, ReLU. (No LSTM: that is a core.)
    """

    obs_shape: tuple[int, ...]
    channels: Sequence[int] = (16, 32, 32)
    layer_norm: bool = False  # LayerNorm after the dense layer, before its ReLU

    @nn.compact
    def __call__(self, x: Array) -> Array:
        x, batch_shape = _images(x, self.obs_shape)
        for channels in self.channels:
            x = _conv(channels, 3, padding="SAME")(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = _ResidualBlock()(x)
            x = _ResidualBlock()(x)
        return _dense_out(jax.nn.relu(x), batch_shape, 256, self.layer_norm)


class MinAtarCNN(nn.Module):
    """Young & Tian 2019 (MinAtar, arXiv:1903.03176): `[..., *obs_shape]` -> `[..., 128]`.

    On `[10, 10, C]`: conv 16 3x3 s1 valid -> `[8, 8, 16]`, ReLU, flatten 1024, dense 128, ReLU.
    """

    obs_shape: tuple[int, ...]
    layer_norm: bool = False  # LayerNorm after the dense layer, before its ReLU

    @nn.compact
    def __call__(self, x: Array) -> Array:
        x, batch_shape = _images(x, self.obs_shape)
        x = jax.nn.relu(_conv(16, 3, 1)(x))
        return _dense_out(x, batch_shape, 128, self.layer_norm)


# ---------------------------------------------------------------- nested observations

EMBED_FEATURES = 16
"""Width of the embedding of each value of an integer leaf (`embed` encoder)."""


class LeafInput(NamedTuple):
    """How `MultiInputTorso` reads one leaf of a nested observation.

    Attributes:
      key: the leaf's key (`podrl.envs.observations.leaf_key`). shape: its shape `[*leaf]` (one env).
      encoder: mlp, nature_cnn, impala_resnet, minatar_cnn, embed or none (the leaf is not read).
      num_values: embed: the table's size (the leaf's values lie in [offset, offset + num_values)).
      offset: embed: subtracted from a value before the lookup (the spec's minimum).
    """

    key: str
    shape: tuple[int, ...]
    encoder: str
    num_values: int = 0
    offset: int = 0


class ObservationInputs(NamedTuple):
    """The leaves of a nested observation as `MultiInputTorso` reads them (`podrl.agents.inputs`), in key order;
    a network's `obs_shape` for such an observation (hashable, static)."""

    leaves: tuple[LeafInput, ...]

    @property
    def encoded(self) -> tuple[LeafInput, ...]:
        """The leaves that are read (encoder not "none")."""
        return tuple(leaf for leaf in self.leaves if leaf.encoder != "none")


def _module_name(key: str) -> str:
    return "input_" + (re.sub(r"\W", "_", key) or "_")


class MultiInputTorso(nn.Module):
    """A nested observation -> `[..., sum F_i]`: each encoded leaf `[..., *leaf]` through its own encoder
    (`LeafInput.encoder`; params `input_<key>`), the features concatenated in key order. mlp: an `MLPTorso`
    of `hidden_sizes`; a CNN: that torso (uint8 scaled inside); embed: `EMBED_FEATURES` per value, flattened."""

    inputs: ObservationInputs
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, observation) -> Array:
        leaves = keyed_leaves(observation)
        features = [self._encode(leaf, leaves[leaf.key]) for leaf in self.inputs.encoded]
        return jnp.concatenate(features, axis=-1)

    def _encode(self, leaf: LeafInput, x: Array) -> Array:
        name = _module_name(leaf.key)
        if leaf.encoder == "embed":
            batch_shape = x.shape[: x.ndim - len(leaf.shape)]
            index = jnp.clip(x.astype(jnp.int32) - leaf.offset, 0, leaf.num_values - 1)
            return nn.Embed(leaf.num_values, EMBED_FEATURES, name=name)(index).reshape(batch_shape + (-1,))
        return make_torso(leaf.encoder, leaf.shape, self.hidden_sizes, self.activation, name=name,
                          layer_norm=self.layer_norm)(x)


def make_torso(torso: str, obs_shape: Sequence[int] | ObservationInputs, hidden_sizes: Sequence[int] = (64, 64),
               activation: str = "tanh", name: str | None = None, layer_norm: bool = False) -> nn.Module:
    """The torso module named `torso` for observations `[..., *obs_shape]` (checked by `check_torso`);
    `layer_norm` adds a LayerNorm after each hidden dense layer (parameters otherwise unchanged). For a
    nested observation (`obs_shape` its `ObservationInputs`) the `MultiInputTorso` of its leaves."""
    if isinstance(obs_shape, ObservationInputs):
        return MultiInputTorso(obs_shape, tuple(hidden_sizes), activation, layer_norm, name=name)
    obs_shape = tuple(int(d) for d in obs_shape)
    check_torso(torso, obs_shape)
    if torso == "mlp":
        return MLPTorso(obs_shape, tuple(hidden_sizes), activation, layer_norm, name=name)
    cls = {"nature_cnn": NatureCNN, "impala_resnet": ImpalaResNet, "minatar_cnn": MinAtarCNN}[torso]
    return cls(obs_shape, layer_norm=layer_norm, name=name)
