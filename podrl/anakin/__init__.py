"""Anakin: the JAX env and the agent in one jitted program per device."""

from podrl.anakin.compiled import AnakinCompiled, AnakinState, CallMetrics, summarize_call
from podrl.anakin.config import AnakinConfig
from podrl.anakin.program import AnakinProgram
from podrl.anakin.train import AnakinResult, train_anakin
from podrl.core.errors import NonFiniteError

__all__ = ["AnakinConfig", "AnakinCompiled", "AnakinProgram", "AnakinState", "CallMetrics", "summarize_call",
           "AnakinResult", "train_anakin", "NonFiniteError"]
