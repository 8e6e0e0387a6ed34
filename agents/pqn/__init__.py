"""PQN (Gallici et al. 2024, arXiv:2407.04811): Q(lambda) on parallel on-policy rollouts,
LayerNorm, epsilon-greedy acting, no target network and no replay, for both layouts.

    config = PQNConfig(learning_rate=5e-4)
    config.check_batch(rollout_length, envs_per_shard)
    agent = config.make_agent(env_spec, total_updates)   # a podrl.core.types.Agent

    python scripts/train_anakin.py agent:pqn
"""

from podrl.agents.optimizers import moved_here
from podrl.agents.pqn.agent import make_agent
from podrl.agents.pqn.config import PQNConfig
from podrl.agents.pqn.losses import PQNBatch, make_loss_fn

__all__ = ["PQNConfig", "make_agent", "PQNBatch", "make_loss_fn"]

__getattr__ = moved_here(__name__, {"make_optimizer": "make_optimizer"})
