"""SAC (Haarnoja et al. 2018) with a replay buffer per learner shard, for both layouts.

    config = SACConfig(buffer_size=100_000, warmup_steps=1_000, replay_ratio=1.0)
    config.check_batch(rollout_length, envs_per_shard)
    agent = config.make_agent(env_spec, total_updates)   # a podrl.core.types.Agent

Continuous (bounded box) actions only; the buffer lives in `TrainState.shard_state` on the
learner devices, and each update replays `replay_ratio` gradient steps per env step.
"""

from podrl.agents.sac.agent import SACTemperature, make_agent, sample_action
from podrl.agents.sac.config import SACConfig
from podrl.agents.sac.losses import actor_loss, soft_q_target, tanh_gaussian_log_prob, temperature_loss

__all__ = ["SACConfig", "SACTemperature", "make_agent", "sample_action", "actor_loss", "soft_q_target",
           "tanh_gaussian_log_prob", "temperature_loss"]
