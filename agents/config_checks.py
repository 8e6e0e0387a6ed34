"""Validation shared by the agent configs (`PPOConfig`, `ImpalaConfig`); imports no JAX."""

from __future__ import annotations

from podrl.errors import ConfigError, is_int

ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu")
"""Names accepted by an agent config's `activation` (functions in `jax.nn`, see `agents.networks`)."""


def check_network_fields(config: object) -> None:
    """Raises ConfigError unless `config.hidden_sizes` is a tuple or list of positive ints
    (stored back on the frozen dataclass as a tuple) and `config.activation` is in ACTIVATIONS."""
    sizes = config.hidden_sizes
    if not isinstance(sizes, (tuple, list)) or not all(is_int(s) and s > 0 for s in sizes):
        raise ConfigError("hidden_sizes", f"must be a tuple of positive ints, got {sizes!r}")
    object.__setattr__(config, "hidden_sizes", tuple(sizes))
    if config.activation not in ACTIVATIONS:
        raise ConfigError("activation", f"must be one of {ACTIVATIONS}, got {config.activation!r}")
