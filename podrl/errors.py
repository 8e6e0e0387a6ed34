"""Errors podrl raises for bad input, each naming what is at fault."""


class ConfigError(ValueError):
    """An invalid configuration value. The message starts with the field name."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")
