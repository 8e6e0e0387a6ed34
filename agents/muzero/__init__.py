"""MuZero and Gumbel MuZero (search from mctx) with a sequence replay per learner shard, for both layouts.

    config = MuZeroConfig(search="gumbel", num_simulations=8, unroll_steps=5, td_steps=5)
    config.check_batch(rollout_length, envs_per_shard)
    agent = config.make_agent(env_spec, total_updates)   # a podrl.core.types.Agent

`act` searches the learned model (`podrl.agents.muzero.search`) and returns the search policy as the
"policy" extra; `update` adds the rollout to this shard's buffer and learns from windows of it.
"""

from podrl.agents.muzero.agent import MuZeroLearnerState, make_agent
from podrl.agents.muzero.config import MuZeroConfig
from podrl.agents.muzero.targets import scalar_to_two_hot, two_hot_to_scalar, window_targets

__all__ = ["MuZeroConfig", "MuZeroLearnerState", "make_agent", "scalar_to_two_hot", "two_hot_to_scalar",
           "window_targets"]
