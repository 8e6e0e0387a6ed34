"""R2D2: a recurrent Q network learned from prioritised replayed sequences, for both layouts.

    config = R2D2Config(core="lstm", burn_in=4, sequence_length=8, sequence_period=4)
    config.check_batch(rollout_length, envs_per_shard)
    agent = config.make_agent(env_spec, total_updates)   # a podrl.core.types.Agent

`act` steps the core and acts epsilon-greedily with each actor row's Ape-X epsilon (the rows' global
env columns come from the layout, `podrl.core.types.EnvColumns`); `update` adds the rollout to this
shard's prioritised sequence replay (`podrl.agents.prioritised`) and learns from sequences drawn by
priority, each warmed up from the recurrent state its actor stored.
"""

from podrl.agents.r2d2.agent import R2D2ActorState, R2D2LearnerState, apex_epsilons, make_agent
from podrl.agents.r2d2.config import R2D2Config
from podrl.agents.r2d2.losses import make_loss_fn, n_step_q_targets

__all__ = ["R2D2Config", "R2D2ActorState", "R2D2LearnerState", "apex_epsilons", "make_agent", "make_loss_fn",
           "n_step_q_targets"]
