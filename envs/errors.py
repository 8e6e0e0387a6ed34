"""The errors envs raise for bad input; `podrl.core.errors` re-exports these same classes.

Envs import neither podrl nor agents (CONTRIBUTING.md), yet an env adapter must raise the
errors the training scripts report as one message (exit status 2). So the two classes
live here, and `podrl.core.errors` imports them: one class each, so every `except` on either
name catches both. `UnknownEnvError` (an env name that builds nothing) lives here too, so every
module of `podrl.envs` can raise it without importing the registry.
"""

from __future__ import annotations


class UserInputError(Exception):
    """An error the user caused and can fix: a flag, a config value, their environment, a missing extra.

    Its message is one paragraph: what is wrong, where, what was expected, what came
    instead, and the fix. The training scripts print it and exit with status 2 (the
    traceback only with `--debug` or `PODRL_DEBUG=1`). `label` prefixes the message there.
    """

    label = "error"


class ConfigError(UserInputError, ValueError):
    """An invalid configuration value. The message starts with the field name."""

    label = "invalid config"

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


class UnknownEnvError(ConfigError):
    """Raised for an env name that resolves to nothing (or whose import fails).

    A `ConfigError` on the `env` field, so both layouts print it the same way:
    `error: invalid config: env: <message>`.
    """

    def __init__(self, message: str):
        super().__init__("env", message)
