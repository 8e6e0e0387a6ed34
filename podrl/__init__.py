"""podrl: distributed reinforcement learning in JAX, Anakin and Sebulba layouts."""

from podrl.core.types import Agent, AgentConfig, TrainState, Trajectory

__all__ = ["Agent", "AgentConfig", "TrainState", "Trajectory"]
