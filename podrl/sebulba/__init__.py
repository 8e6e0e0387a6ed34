"""Sebulba: actor threads on host environments, learner devices, versioned params."""

from podrl.sebulba.config import SebulbaConfig
from podrl.sebulba.train import SebulbaResult, train_sebulba

__all__ = ["SebulbaConfig", "SebulbaResult", "train_sebulba"]
