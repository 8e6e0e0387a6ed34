"""What a network's torso reads: a flat observation's shape, or the encoders of a nested one's leaves.

`torso_input(env_spec, torso, torso_per_key)` is the `obs_shape` every network of `podrl.agents`
is built with (`podrl.agents.torsos.make_torso` reads it):

- a flat observation (`dm_env.specs.Array`): its shape `[*obs]`, checked for `torso`
  (`podrl.agents.torsos.check_torso`); `torso_per_key` must be empty;
- a nested one (dicts, tuples: `podrl.envs.observations`): an `ObservationInputs` naming each leaf's
  encoder. `torso_per_key` ({key: encoder}, the config's `key=encoder` items) names any of them;
  the others get one by shape and dtype:

  * the `action_mask` leaf: none (the mask restricts the actions, `podrl.agents.masking`; name it,
    e.g. `action_mask=mlp`, to feed it to the torso as well);
  * an integer image whose spec bounds it to at most `MAX_GRID_VALUES` values (xland-minigrid's
    `[V, V, 2]` tile and colour ids, a board of piece ids): `embed_cnn`, each id embedded and the
    MinAtar CNN over the embeddings (a CNN would read the ids as intensities; a uint8 frame's
    0-255 bounds are more values, so frames stay pixels);
  * an image, rank 3 `[C, H, W]` / `[H, W, C]` or a uint8 `[H, W]`: the config's `torso` if it is a
    CNN, else `minatar_cnn` for an image under 36 pixels a side and `nature_cnn` from 36 (the
    smallest the Nature CNN's strides take);
  * an integer leaf of rank <= 1 whose spec bounds it (`DiscreteArray`, `BoundedArray`) to at most
    `MAX_EMBED_VALUES` values: embed (gymnasium's Discrete spaces, Blackjack's three numbers);
  * anything else (float vectors, bools, unbounded integers): mlp, an MLP of the config's
    `hidden_sizes` on the flattened leaf.

Every choice is checked against its leaf (a CNN needs an image, embed bounded integers, embed_cnn a
bounded integer image, an `mlp` refuses whole frames) with a ConfigError("torso_per_key") naming the key;
unknown keys are refused naming the observation's keys. Nothing is traced.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from dm_env import specs

from podrl.agents.config_checks import PIXEL_TORSOS
from podrl.agents.torsos import LeafInput, ObservationInputs, channels_first, check_torso
from podrl.core.errors import ConfigError
from podrl.envs.observations import ACTION_MASK, is_nested, leaf_specs

MAX_EMBED_VALUES = 4096
"""An integer leaf with more values than this is read by an MLP unless `torso_per_key` says embed."""

MAX_GRID_VALUES = 64
"""An integer image bounded to at most this many values is a grid of ids (`embed_cnn`), not pixels."""

SMALL_IMAGE = 36
"""Images with a side under this many pixels get `minatar_cnn` by default, larger ones `nature_cnn`."""

FIELD = "torso_per_key"


def torso_input(env_spec: Any, torso: str, torso_per_key: Sequence[str] = ()) -> tuple[int, ...] | ObservationInputs:
    """The `obs_shape` of a network for `env_spec`'s observations (module docstring); ConfigError("torso")
    or ConfigError("torso_per_key") for a choice that cannot read them."""
    spec = env_spec.observation
    per_key = dict(str(item).split("=", 1) for item in torso_per_key)
    if not is_nested(spec):
        if per_key:
            raise ConfigError(FIELD, f"names keys {sorted(per_key)}, but this environment's observation is one "
                                     f"array of shape {tuple(spec.shape)} (no keys); leave torso_per_key empty")
        shape = tuple(int(d) for d in spec.shape)
        check_torso(torso, shape)
        return shape
    leaves = leaf_specs(spec)
    unknown = sorted(set(per_key) - {key for key, _ in leaves})
    if unknown:
        raise ConfigError(FIELD, f"names {unknown}, not keys of this environment's observation; its keys are "
                                 f"{[key for key, _ in leaves]}")
    inputs = ObservationInputs(tuple(_leaf_input(key, leaf, per_key.get(key) or default_encoder(key, leaf, torso))
                                     for key, leaf in leaves))
    if not inputs.encoded:
        raise ConfigError(FIELD, f"reads no leaf of the observation (every one is 'none'): name an encoder for one of "
                                 f"{[key for key, _ in leaves]}")
    return inputs


def _is_image(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    return len(shape) == 3 or (len(shape) == 2 and dtype == np.uint8)


def _bounds(leaf: specs.Array) -> tuple[int, int] | None:
    """`(minimum, number of values)` of an integer leaf its spec bounds, else None."""
    if not np.issubdtype(np.dtype(leaf.dtype), np.integer) or not isinstance(leaf, specs.BoundedArray):
        return None
    low, high = int(np.min(leaf.minimum)), int(np.max(leaf.maximum))
    return (low, high - low + 1) if high >= low else None


def default_encoder(key: str, leaf: specs.Array, torso: str) -> str:
    """The encoder a leaf gets when `torso_per_key` does not name it (module docstring)."""
    shape, dtype = tuple(int(d) for d in leaf.shape), np.dtype(leaf.dtype)
    if key == ACTION_MASK:
        return "none"
    bounds = _bounds(leaf)
    if _is_image(shape, dtype) and bounds is not None and bounds[1] <= MAX_GRID_VALUES:
        return "embed_cnn"
    if _is_image(shape, dtype):
        if torso in PIXEL_TORSOS:
            return torso
        side = min(shape[1:] if len(shape) == 3 and channels_first(shape) else shape[:2])
        return "minatar_cnn" if side < SMALL_IMAGE else "nature_cnn"
    if len(shape) <= 1 and bounds is not None and bounds[1] <= MAX_EMBED_VALUES:
        return "embed"
    return "mlp"


def _leaf_input(key: str, leaf: specs.Array, encoder: str) -> LeafInput:
    """The `LeafInput` of one leaf read by `encoder`, checked against its shape and dtype."""
    shape = tuple(int(d) for d in leaf.shape)
    if encoder == "none":
        return LeafInput(key, shape, encoder)
    if encoder in ("embed", "embed_cnn"):
        bounds = _bounds(leaf)
        if bounds is None:
            raise ConfigError(FIELD, f"{key}={encoder} needs an integer leaf with bounds (a DiscreteArray or an "
                                     f"integer BoundedArray spec), but {key!r} is {leaf!r}; use mlp")
        if encoder == "embed_cnn" and not _is_image(shape, np.dtype(np.uint8)):
            raise ConfigError(FIELD, f"{key}=embed_cnn needs a grid [H, W] or [H, W, C] / [C, H, W], but {key!r} "
                                     f"has shape {shape}; use embed")
        return LeafInput(key, shape, encoder, num_values=bounds[1], offset=bounds[0])
    try:
        check_torso(encoder, shape)
    except ConfigError as e:
        raise ConfigError(FIELD, f"leaf {key!r} (shape {shape}): {e}") from None
    return LeafInput(key, shape, encoder)


def has_image_encoder(obs_shape: Any) -> bool:
    """True for a nested observation one of whose leaves a CNN reads (its torso is shared by default)."""
    image_encoders = PIXEL_TORSOS + ("embed_cnn",)
    return isinstance(obs_shape, ObservationInputs) and any(leaf.encoder in image_encoders for leaf in obs_shape.leaves)
