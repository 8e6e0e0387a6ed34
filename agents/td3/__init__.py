"""TD3 (Fujimoto et al. 2018) with a replay buffer per learner shard, for both layouts.

    config = TD3Config(buffer_size=100_000, warmup_steps=10_000, policy_delay=2)
    config.check_batch(rollout_length, envs_per_shard)
    agent = config.make_agent(env_spec, total_updates)   # a podrl.core.types.Agent

Continuous (bounded box) actions only; the buffer lives in `TrainState.shard_state`.
"""

from podrl.agents.td3.agent import make_agent
from podrl.agents.td3.config import TD3Config
from podrl.agents.td3.losses import clipped_double_q_target, deterministic_actor_loss, smoothed_target_action

__all__ = ["TD3Config", "make_agent", "clipped_double_q_target", "deterministic_actor_loss",
           "smoothed_target_action"]
