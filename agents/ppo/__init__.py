"""Proximal Policy Optimization (Schulman et al. 2017) with GAE, for both layouts.

    config = PPOConfig(learning_rate=3e-4)
    config.check_batch(rollout_length, envs_per_shard)
    agent = config.make_agent(env_spec, total_updates)   # a podrl.core.types.Agent
"""

from podrl.agents.optimizers import moved_here
from podrl.agents.ppo.agent import make_agent
from podrl.agents.ppo.config import PPOConfig
from podrl.agents.ppo.losses import PPOBatch, make_loss_fn

__all__ = [
    "PPOConfig", "make_agent", "PPOBatch", "make_loss_fn",
]

__getattr__ = moved_here(__name__, {"make_optimizer": "make_optimizer"})
