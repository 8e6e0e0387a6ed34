"""IMPALA (Espeholt et al. 2018): an actor-critic trained with V-trace, for both layouts.

    config = ImpalaConfig(learning_rate=7e-4)
    config.check_batch(rollout_length, envs_per_shard)
    agent = config.make_agent(env_spec, total_updates)   # a podrl.core.types.Agent

V-trace corrects for the lag between the acting and the learning policy, which
is what Sebulba's `lag=1` / async modes produce; under Anakin (and `lag=0`)
the data is on-policy for the first minibatch of each update.
"""

from podrl.agents.impala.agent import make_agent
from podrl.agents.impala.config import ImpalaConfig
from podrl.agents.impala.losses import make_loss_fn
from podrl.agents.optimizers import moved_here

__all__ = ["ImpalaConfig", "make_agent", "make_loss_fn"]

__getattr__ = moved_here(__name__, {"make_optimizer": "make_optimizer"})
