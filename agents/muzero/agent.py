"""The MuZero `Agent`: act by searching the learned model (mctx), learn from replayed windows.

Train state (`podrl.core.types.TrainState`):
  params       the `MuZeroNetwork`'s flax params: all that actors need (search runs the model).
  opt_state    `MuZeroLearnerState` (`podrl.agents.off_policy.TargetLearnerState`): Adam state, the
               target network's params, gradient steps taken.
  update_step  int32 [], updates applied.
  shard_state  `podrl.agents.replay.ReplayBuffer` of `Step`s, `buffer_size` env steps; each learner
               shard fills and samples its own.

`update` is the replay frame `podrl.agents.off_policy.replay_update` with MuZero's pieces
(`replay_pieces`), on one learner shard inside the layout's `shard_map`: it adds this shard's
`[T, B]` rollout to its buffer (flattened time-major, so one env's steps lie B slots apart), then
(once the buffer holds `min_fill`) takes `round(replay_ratio * T * B)` Adam steps
(`off_policy.target_sgd_step`), each on `batch_size` windows of `unroll_steps + td_steps`
consecutive steps of one env (`podrl.agents.replay.sample_windows`), with targets from
`podrl.agents.muzero.targets.window_targets` (values bootstrapped from the target network) and the
unroll loss of `podrl.agents.muzero.losses`; gradients averaged across learners by
`podrl.agents.actor_critic.sgd_step`. Nothing here mentions devices, threads or layouts. No
reanalyse: the policy targets are the actors' stored search policies.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from podrl.agents import replay
from podrl.agents.actor_critic import check_total_updates
from podrl.agents.muzero import search
from podrl.agents.muzero.config import MuZeroConfig
from podrl.agents.muzero.losses import MuZeroBatch, make_loss_fn
from podrl.agents.muzero.networks import MuZeroNetwork
from podrl.agents.muzero.targets import window_targets
from podrl.agents.off_policy import (
    ReplayPieces, TargetLearnerState, init_target_learner, replay_update, target_sgd_step,
)
from podrl.agents.optimizers import per_update_optimizer
from podrl.agents.q_learning import check_discrete_actions
from podrl.agents.returns import learner_rewards
from podrl.agents.torsos import check_torso
from podrl.envs.types import EnvSpec
from podrl.core.parallel import mean_across_learners
from podrl.core.types import Agent, TrainState, Trajectory

Array = jax.Array


class Step(NamedTuple):
    """One env step as the sequence replay stores it; batched, every field leads with `[N]`.

    Attributes:
      observation: `[*obs]` o_t (uint8 stays uint8). action: int32 `[]` a_t.
      reward: float32 `[]` r_{t+1} (after the learner's clip). discount: float32 `[]` (0: terminated at t+1).
      truncated: bool `[]` the episode was cut at t+1. next_observation: `[*obs]` o_{t+1} before any reset.
      policy: float32 `[A]` the search's action weights at t (the policy target).
    """

    observation: Array
    action: Array
    reward: Array
    discount: Array
    truncated: Array
    next_observation: Array
    policy: Array


MuZeroLearnerState = TargetLearnerState
"""MuZero's `TrainState.opt_state` (the same on every shard): Adam state, target params, gradient steps."""


class MuZeroParts(NamedTuple):
    """What the pure functions close over; `config`, `optimizer`, `grad_fn`, `hyperparams` are the
    fields `podrl.agents.actor_critic.sgd_step` reads."""

    config: MuZeroConfig
    network: MuZeroNetwork
    optimizer: optax.GradientTransformation
    learning_rate: Callable[[Array], Array]  # update step -> step size
    grad_fn: Callable[..., Any]
    env_spec: EnvSpec
    hyperparams: Any = None


def make_network(config: MuZeroConfig, env_spec: EnvSpec) -> MuZeroNetwork:
    """The config's `MuZeroNetwork` for `env_spec`: ConfigError("env") unless actions are discrete,
    ConfigError("torso") for a torso that cannot read the observations (nothing is traced)."""
    check_discrete_actions("muzero", env_spec)
    obs_shape = tuple(int(d) for d in env_spec.observation.shape)
    check_torso(config.torso, obs_shape)
    return MuZeroNetwork(obs_shape, int(env_spec.action.num_values), config.support_size, config.torso,
                         config.hidden_sizes, config.activation, config.layer_norm, config.latent_size,
                         config.dynamics_sizes, config.prediction_sizes)


def make_parts(config: MuZeroConfig, env_spec: EnvSpec, total_updates: int) -> MuZeroParts:
    """What the agent's functions close over, for `env_spec` (discrete actions) and a run of
    `total_updates` updates."""
    total_updates = check_total_updates(total_updates)
    network = make_network(config, env_spec)
    optimizer, schedule = per_update_optimizer(config, total_updates)
    grad_fn = jax.value_and_grad(make_loss_fn(config, network), has_aux=True)
    return MuZeroParts(config, network, optimizer, schedule, grad_fn, env_spec)


def make_agent(config: MuZeroConfig, env_spec: EnvSpec, total_updates: int) -> Agent:
    """The MuZero agent for `env_spec` (discrete actions); `total_updates` updates make the run."""
    return agent_from_parts(make_parts(config, env_spec, total_updates))


def agent_from_parts(parts: MuZeroParts) -> Agent:
    """The agent whose functions close over `parts` (benchmarks/muzero_parts.py times both)."""
    config, network = parts.config, parts.network
    return Agent(
        init=functools.partial(_init, parts),
        init_actor_state=lambda batch_size: (),
        act=functools.partial(search.act, config, network),
        act_greedy=functools.partial(search.act_greedy, config, network),
        update=functools.partial(replay_update, replay_pieces(parts)),
        reshard_state=replay.refill,  # its windows follow each shard's env layout, which a new shard count changes
    )


def example_step(env_spec: EnvSpec) -> Step:
    """One stored `Step`'s shapes and dtypes for `env_spec` (discrete actions)."""
    obs = jax.ShapeDtypeStruct(tuple(env_spec.observation.shape), env_spec.observation.dtype)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    policy = jax.ShapeDtypeStruct((int(env_spec.action.num_values),), jnp.float32)
    return Step(obs, jax.ShapeDtypeStruct((), jnp.int32), scalar, scalar, jax.ShapeDtypeStruct((), jnp.bool_),
                obs, policy)


def _init(parts: MuZeroParts, key: Array, env_spec: EnvSpec) -> TrainState:
    """Fresh params, Adam state, the target network as a copy, an empty buffer."""
    obs = jnp.zeros((1,) + tuple(env_spec.observation.shape), env_spec.observation.dtype)
    params = parts.network.init(key, obs, jnp.zeros((1,), jnp.int32))
    buffer = replay.init(parts.config.buffer_size, example_step(parts.env_spec))  # env_spec may be traced here
    return TrainState(params, init_target_learner(parts.optimizer.init(params), params), jnp.zeros((), jnp.int32),
                      buffer)


def rollout_steps(traj: Trajectory, reward: Array) -> Step:
    """The `T * B` `Step`s of a `[T, B]` trajectory, flattened time-major (env b at slots = b mod B)."""
    steps = Step(traj.observation, traj.action.astype(jnp.int32), reward, traj.discount, traj.truncated,
                 traj.next_observation, traj.agent_extras["policy"])
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), steps)


def batch_from_windows(parts: MuZeroParts, target_params, windows: Step) -> MuZeroBatch:
    """The `MuZeroBatch` of windows `[N, L]`: targets with bootstrap values from `target_params`."""
    cfg = parts.config
    n, length = windows.reward.shape
    flat_next = windows.next_observation.reshape((n * length,) + windows.next_observation.shape[2:])
    root = search.root(parts.network, cfg.support_size, target_params, flat_next)
    bootstrap = root.value.reshape(n, length)
    episode_end = (windows.discount == 0.0) | windows.truncated
    targets = jax.vmap(window_targets, in_axes=(0, 0, 0, 0, 0, None, None, None))(
        windows.reward, windows.discount, episode_end, windows.policy, bootstrap, cfg.unroll_steps, cfg.td_steps,
        cfg.gamma)
    return MuZeroBatch(windows.observation[:, 0], windows.action[:, : cfg.unroll_steps], targets)


def _batch(parts: MuZeroParts, stride: int, buffer: replay.ReplayBuffer, key: Array, params,
           target_params) -> MuZeroBatch:
    """`batch_size` windows sampled from `buffer` (one env's steps `stride` slots apart), as a batch."""
    del params  # the bootstrap values come from the target network alone
    cfg = parts.config
    windows = replay.sample_windows(buffer, key, cfg.batch_size, cfg.window_length, stride)
    return batch_from_windows(parts, target_params, windows)


def _sgd_step(parts: MuZeroParts, stride: int, buffer: replay.ReplayBuffer, carry, key: Array):
    """One Adam step on `batch_size` windows sampled from `buffer`, then the target update
    (`off_policy.target_sgd_step`); a `lax.scan` body over `(params, MuZeroLearnerState)`."""
    return target_sgd_step(parts, functools.partial(_batch, parts, stride), buffer, carry, key)


def _sgd_step_for(parts: MuZeroParts, envs_per_shard: int):
    """`_sgd_step` for a rollout of `envs_per_shard` envs (one env's steps lie that many slots apart)."""
    return functools.partial(_sgd_step, parts, envs_per_shard)


def _items(parts: MuZeroParts, traj: Trajectory) -> Step:
    """The rollout's `T * B` `Step`s, rewards clipped."""
    return rollout_steps(traj, learner_rewards(traj.reward, parts.config.reward_clip, 1.0))


def _hand_on(train_state: TrainState, params, traj: Trajectory):
    """The learned params as they are; metric "search_value" (the rollout's mean root value)."""
    del train_state
    return params, {"search_value": mean_across_learners(jnp.mean(traj.agent_extras["search_value"]))}


def replay_pieces(parts: MuZeroParts) -> ReplayPieces:
    """MuZero's pieces of `podrl.agents.off_policy.replay_update`. Its metrics: the loss's (0 before
    learning starts), learning, replay_fill, search_value, learning_rate."""
    return ReplayPieces(parts.config, parts.config.min_fill, functools.partial(_items, parts),
                        functools.partial(_sgd_step_for, parts), _all_params, _hand_on, parts.learning_rate)


def _all_params(params):
    """The gradient steps move all of MuZero's params (actors need nothing else)."""
    return params
