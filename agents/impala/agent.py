"""The IMPALA `Agent`: act with the actor-critic, learn with V-trace actor-critic SGD.

`update` runs on one learner shard inside the layout's `shard_map`; it reduces
across shards only through `podrl.core.parallel`: `learner_value_and_grad` averages
gradients once per minibatch; the metrics it returns are this shard's, which the
layout averages (`podrl.core.parallel.learner_metrics`). A minibatch is a group of whole
sequences (a slice of the env axis), so V-trace always sees the full `T` steps of each env. Acting, init and the SGD
step are `podrl.agents.actor_critic`'s.
"""

from __future__ import annotations

import functools

import jax

from podrl.agents.actor_critic import Parts, actor_critic_agent, finish_update, for_member, sgd_step
from podrl.agents.impala.config import ImpalaConfig
from podrl.agents.impala.losses import make_loss_fn
from podrl.agents.optimizers import moved_here
from podrl.agents.unroll import env_minibatches
from podrl.core.types import Agent, Metrics, TrainState, Trajectory
from podrl.envs.types import EnvSpec

Array = jax.Array

__all__ = ["make_agent"]
__getattr__ = moved_here(__name__, {"make_optimizer": "make_optimizer"})


def make_agent(config: ImpalaConfig, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The IMPALA agent for `env_spec`; `total_updates` calls of `update` make the run."""
    return actor_critic_agent(config, env_spec, total_updates, make_loss_fn, _update)


def _minibatches(traj: Trajectory, m: int) -> Trajectory:
    """`[T, B]` -> `[m, T, B / m]` (actor state `[B]` -> `[m, B / m]`): env columns
    `i * B/m ..` go to minibatch i, each sequence whole."""
    steps, actor_state = env_minibatches(traj._replace(actor_state=()), traj.actor_state, m)
    return steps._replace(actor_state=actor_state)


def _update(parts: Parts, train_state: TrainState, traj: Trajectory, key: Array) -> tuple[TrainState, Metrics]:
    """`num_minibatches` SGD steps, one per group of whole env sequences of this shard."""
    parts = for_member(parts, train_state)  # a population member's own hyperparams
    cfg = parts.config
    traj.validate()
    cfg.check_batch(*traj.reward.shape)
    if "log_prob" not in traj.agent_extras:
        raise ValueError("Trajectory.agent_extras lacks 'log_prob'; IMPALA's act records it")
    (params, opt_state), metrics = jax.lax.scan(
        functools.partial(sgd_step, parts, key),
        (train_state.params, train_state.opt_state),
        _minibatches(traj, cfg.num_minibatches),
    )
    return finish_update(parts, train_state, params, opt_state, metrics)
