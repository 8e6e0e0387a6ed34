"""Proximal Policy Optimization (Schulman et al. 2017) with GAE, for both layouts.

    config = PPOConfig(learning_rate=3e-4)
    config.check_batch(rollout_length, envs_per_shard)
    agent = config.make_agent(env_spec, total_updates)   # a podrl.core.types.Agent
"""

from podrl.agents.ppo.agent import make_agent, make_optimizer
from podrl.agents.ppo.config import PPOConfig
from podrl.agents.ppo.losses import PPOBatch, make_loss_fn

__all__ = [
    "PPOConfig", "make_agent", "make_optimizer", "PPOBatch", "make_loss_fn",
]
