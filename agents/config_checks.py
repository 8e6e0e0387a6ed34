"""Config pieces shared by the actor-critic agent configs (`PPOConfig`, `ImpalaConfig`); imports no JAX.

`NetworkConfig` is the mixin dataclass holding the network fields both configs inherit
(declared and documented once, here); `check_network_fields` validates them.
"""

from __future__ import annotations

import dataclasses

from podrl.errors import ConfigError, is_int

ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu")
"""Names accepted by an agent config's `activation` (functions in `jax.nn`, see `agents.torsos`)."""

TORSOS = ("mlp", "nature_cnn", "impala_resnet", "minatar_cnn")
"""Names accepted by an agent config's `torso` (modules in `agents.torsos`)."""

PIXEL_TORSOS = ("nature_cnn", "impala_resnet", "minatar_cnn")
"""The image (CNN) torsos; they share one torso between policy and value by default."""

CORES = ("none", "lstm", "gru")
"""Names accepted by an agent config's `core` (the recurrent cores of `agents.cores`)."""


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The actor-critic network: a torso (`agents.torsos`), an optional recurrent core
    (`agents.cores`) and policy / value heads (`agents.networks`)."""

    torso: str = "mlp"
    """Observation encoder: mlp, nature_cnn (Atari, Mnih et al. 2015), impala_resnet (Espeholt et al. 2018) or minatar_cnn (Young & Tian 2019); CNNs scale uint8 pixels to [0, 1] inside the network."""
    shared_torso: bool | None = None
    """One torso feeding both the policy and the value head (True) or one torso each (False); default: shared for the CNN torsos and with a core, separate for mlp."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the mlp torso (both the actor and the critic MLP when separate); the CNN torsos ignore it."""
    activation: str = "tanh"
    """Hidden activation of the mlp torso: one of tanh, relu, gelu, silu, elu (the CNN torsos use ReLU)."""
    core: str = "none"
    """Recurrent core between the (then shared) torso and the heads: none, lstm or gru; the actor carries its state and the learner re-unrolls it."""
    core_size: int = 128
    """Width of the lstm / gru core's state (ignored when core is none)."""


def check_network_fields(config: NetworkConfig) -> None:
    """Raises ConfigError unless `config.hidden_sizes` is a tuple or list of positive ints
    (stored back on the frozen dataclass as a tuple), `config.activation` is in ACTIVATIONS,
    `config.torso` in TORSOS, `config.shared_torso` None, True or False, `config.core` in
    CORES and `config.core_size` a positive int. A core needs the shared torso (its state
    feeds both heads), so `shared_torso=False` with a core is refused."""
    sizes = config.hidden_sizes
    if not isinstance(sizes, (tuple, list)) or not all(is_int(s) and s > 0 for s in sizes):
        raise ConfigError("hidden_sizes", f"must be a tuple of positive ints, got {sizes!r}")
    object.__setattr__(config, "hidden_sizes", tuple(sizes))
    if config.activation not in ACTIVATIONS:
        raise ConfigError("activation", f"must be one of {ACTIVATIONS}, got {config.activation!r}")
    if config.torso not in TORSOS:
        raise ConfigError("torso", f"must be one of {TORSOS}, got {config.torso!r}")
    if config.shared_torso is not None and not isinstance(config.shared_torso, bool):
        raise ConfigError("shared_torso", f"must be True, False or None, got {config.shared_torso!r}")
    if config.core not in CORES:
        raise ConfigError("core", f"must be one of {CORES}, got {config.core!r}")
    if not is_int(config.core_size) or config.core_size <= 0:
        raise ConfigError("core_size", f"must be a positive integer, got {config.core_size!r}")
    if config.core != "none" and config.shared_torso is False:
        raise ConfigError(
            "shared_torso", f"must be True or None with core={config.core!r}: one torso and one "
            f"recurrent core feed both the policy and the value head (separate towers would need two cores)")
