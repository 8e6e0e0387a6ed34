"""DQN (Mnih et al. 2015) with a replay buffer per learner shard, for both layouts.

    config = DQNConfig(buffer_size=50_000, replay_ratio=0.25, double_dqn=True, n_step=3)
    config.check_batch(rollout_length, envs_per_shard)
    agent = config.make_agent(env_spec, total_updates)   # a podrl.core.types.Agent

The buffer lives in `TrainState.shard_state` on the learner devices; each update
adds its shard's rollout and replays `replay_ratio` gradient steps per env step.
"""

from podrl.agents.dqn.agent import DQNLearnerState, make_agent
from podrl.agents.dqn.config import DQNConfig
from podrl.agents.dqn.losses import make_loss_fn, q_learning_target
from podrl.agents.optimizers import moved_here

__all__ = ["DQNConfig", "DQNLearnerState", "make_agent", "make_loss_fn", "q_learning_target"]

__getattr__ = moved_here(__name__, {"make_optimizer": "per_update_optimizer"})
