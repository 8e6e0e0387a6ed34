"""The MuZero `Agent`: act by searching the learned model (mctx), learn from replayed windows.

Train state (`podrl.core.types.TrainState`):
  params       the `MuZeroNetwork`'s flax params: all that actors need (search runs the model).
  opt_state    `MuZeroLearnerState` (`podrl.agents.off_policy.TargetLearnerState`): Adam state, the
               target network's params, gradient steps taken.
  update_step  int32 [], updates applied.
  shard_state  `podrl.agents.replay.ReplayBuffer` of `Step`s, `buffer_size` env steps (`prioritised`: a
               `podrl.agents.prioritised.PrioritisedReplay` of them); each learner shard fills and
               samples its own.

`update` is the replay frame `podrl.agents.off_policy.replay_update` with MuZero's pieces
(`replay_pieces`), on one learner shard inside the layout's `shard_map`: it adds this shard's
`[T, B]` rollout to its buffer (flattened time-major, so one env's steps lie B slots apart), then
(once the buffer holds `min_fill`) takes `round(replay_ratio * T * B)` Adam steps
(`off_policy.target_sgd_step`), each on `batch_size` windows of `unroll_steps + td_steps`
consecutive steps of one env (`podrl.agents.replay.sample_windows`; `prioritised`: drawn by the
priority |v - z| each window's last replay left, importance-weighted), with targets from
`podrl.agents.muzero.targets.window_targets` (values bootstrapped from the target network) and the
unroll loss of `podrl.agents.muzero.losses`; gradients averaged across learners by
`podrl.agents.actor_critic.sgd_step`. The policy targets are the actors' stored search policies,
except for the `reanalyse_fraction` of each batch whose policy and value targets are searched
afresh (`podrl.agents.muzero.reanalyse`). Nothing here mentions devices, threads or layouts.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from podrl.agents import prioritised, replay
from podrl.agents.actor_critic import check_total_updates
from podrl.agents.muzero import search
from podrl.agents.muzero.config import MuZeroConfig
from podrl.agents.muzero.losses import MuZeroBatch, make_loss_fn
from podrl.agents.muzero.networks import MuZeroNetwork
from podrl.agents.muzero.reanalyse import reanalyse
from podrl.agents.muzero.targets import window_targets
from podrl.agents.off_policy import (
    ReplayParts,
    ReplayPieces,
    TargetLearnerState,
    init_target_learner,
    replay_update,
    target_sgd_step,
)
from podrl.agents.optimizers import per_update_optimizer
from podrl.agents.q_learning import discrete_torso_input
from podrl.agents.returns import learner_rewards
from podrl.core.types import Agent, TrainState, Trajectory, no_actor_state
from podrl.envs import observations
from podrl.envs.types import EnvSpec

Array = jax.Array


class Step(NamedTuple):
    """One env step as the sequence replay stores it; batched, every field leads with `[N]`.

    Attributes:
      observation: `[*obs]` o_t (uint8 stays uint8). action: int32 `[]` a_t.
      reward: float32 `[]` r_{t+1} (after the learner's clip). discount: float32 `[]` (0: terminated at t+1).
      truncated: bool `[]` the episode was cut at t+1. next_observation: `[*obs]` o_{t+1} before any reset.
      policy: float32 `[A]` the search's action weights at t (the policy target).
      search_value: float32 `[]` the search's root value at t (stored for `value_bootstrap="search"`
        only; None otherwise, so a run without it stores what it always stored).
    """

    observation: Array
    action: Array
    reward: Array
    discount: Array
    truncated: Array
    next_observation: Array
    policy: Array
    search_value: Array | None = None


MuZeroLearnerState = TargetLearnerState
"""MuZero's `TrainState.opt_state` (the same on every shard): Adam state, target params, gradient steps."""


MuZeroParts = ReplayParts
"""What MuZero's pure functions close over (`podrl.agents.off_policy.ReplayParts`: its config, `MuZeroNetwork`, ...)."""


def make_network(config: MuZeroConfig, env_spec: EnvSpec) -> MuZeroNetwork:
    """The config's `MuZeroNetwork` for `env_spec`: ConfigError("env") unless actions are discrete,
    ConfigError("torso") for a torso that cannot read the observations (nothing is traced)."""
    obs_shape, num_actions = discrete_torso_input("muzero", config.torso, env_spec, config.torso_per_key)
    return MuZeroNetwork(obs_shape, num_actions, config.support_size, config.torso,
                         config.hidden_sizes, config.activation, config.layer_norm, config.latent_size,
                         config.dynamics_sizes, config.prediction_sizes, config.dynamics)


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
        init_actor_state=no_actor_state,
        act=functools.partial(search.act, config, network),
        act_greedy=functools.partial(search.act_greedy, config, network),
        update=functools.partial(replay_update, replay_pieces(parts)),
        # its windows follow each shard's env layout, which a new shard count changes
        reshard_state=prioritised.refill if config.prioritised else replay.refill,
    )


def example_step(env_spec: EnvSpec, search_value: bool = False) -> Step:
    """One stored `Step`'s shapes and dtypes for `env_spec` (discrete actions); `search_value`: with the
    search's root value (`value_bootstrap="search"`)."""
    obs = observations.structs(env_spec.observation)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    policy = jax.ShapeDtypeStruct((int(env_spec.action.num_values),), jnp.float32)
    return Step(obs, jax.ShapeDtypeStruct((), jnp.int32), scalar, scalar, jax.ShapeDtypeStruct((), jnp.bool_),
                obs, policy, scalar if search_value else None)


def _init(parts: MuZeroParts, key: Array, env_spec: EnvSpec) -> TrainState:
    """Fresh params, Adam state, the target network as a copy, an empty buffer (`prioritised`: a
    `podrl.agents.prioritised.PrioritisedReplay` of the steps, a window starting at each)."""
    params = parts.network.init(key, observations.zeros(env_spec.observation, (1,)), jnp.zeros((1,), jnp.int32))
    example = example_step(parts.env_spec, stores_search_value(parts.config))  # env_spec may be traced here
    if parts.config.prioritised:  # a window may start at every step: sequences of period 1
        buffer = prioritised.init(parts.config.buffer_size, example, 1)
    else:
        buffer = replay.init(parts.config.buffer_size, example)
    return TrainState(params, init_target_learner(parts.optimizer.init(params), params), jnp.zeros((), jnp.int32),
                      buffer)


def stores_search_value(config: MuZeroConfig) -> bool:
    """Whether the replay keeps each step's search root value (`value_bootstrap="search"`)."""
    return config.value_bootstrap == "search"


def rollout_steps(traj: Trajectory, reward: Array, search_value: bool = False) -> Step:
    """The `T * B` `Step`s of a `[T, B]` trajectory, flattened time-major (env b at slots = b mod B);
    `search_value`: with the actors' search root values."""
    steps = Step(traj.observation, traj.action.astype(jnp.int32), reward, traj.discount, traj.truncated,
                 traj.next_observation, traj.agent_extras["policy"],
                 traj.agent_extras["search_value"] if search_value else None)
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), steps)


def bootstrap_values(parts: MuZeroParts, target_params, windows: Step) -> Array:
    """`[N, L]` v(o'_{t+j}): the target network's value of each window step's next observation; with
    `value_bootstrap="search"`, the search root value stored with step j + 1 where that step is in the
    window and follows j in the same episode (`search_bootstrap`)."""
    n, length = windows.reward.shape
    flat_next = jax.tree.map(lambda x: x.reshape((n * length,) + x.shape[2:]), windows.next_observation)
    root = search.root(parts.network, parts.config.support_size, target_params, flat_next)
    network = root.value.reshape(n, length)
    return search_bootstrap(windows, network) if stores_search_value(parts.config) else network


def search_bootstrap(windows: Step, network: Array) -> Array:
    """`[N, L]` bootstrap values from the stored searches: step j's is the root value of the search at
    step j + 1 (the search from o'_{t+j}, MuZero's nu_{t+j+1}); `network` `[N, L]` where there is none:
    the window's last step (j + 1 is outside it) and a step after which the episode ended (step j + 1
    starts another episode; a termination's bootstrap is multiplied by 0 anyway)."""
    episode_end = (windows.discount == 0.0) | windows.truncated
    following = jnp.concatenate([windows.search_value[:, 1:], network[:, -1:]], axis=1)
    return jnp.where(episode_end, network, following)


def batch_from_windows(parts: MuZeroParts, target_params, windows: Step, bootstrap: Array | None = None) -> MuZeroBatch:
    """The `MuZeroBatch` of windows `[N, L]`: targets with bootstrap values `bootstrap` `[N, L]`
    (default: `bootstrap_values` from `target_params`)."""
    cfg = parts.config
    if bootstrap is None:
        bootstrap = bootstrap_values(parts, target_params, windows)
    episode_end = (windows.discount == 0.0) | windows.truncated
    targets = jax.vmap(window_targets, in_axes=(0, 0, 0, 0, 0, None, None, None))(
        windows.reward, windows.discount, episode_end, windows.policy, bootstrap, cfg.unroll_steps, cfg.td_steps,
        cfg.gamma)
    return MuZeroBatch(jax.tree.map(lambda x: x[:, 0], windows.observation), windows.action[:, : cfg.unroll_steps],
                       targets)


def _batch(parts: MuZeroParts, stride: int, buffer, key: Array, params, target_params) -> MuZeroBatch:
    """`batch_size` windows sampled from `buffer` (one env's steps `stride` slots apart), as a batch:
    uniformly, or (`prioritised`) by priority with their importance weights and indices; the first
    `reanalyse_fraction` of them reanalysed (`podrl.agents.muzero.reanalyse`, its key folded from `key`)."""
    cfg = parts.config
    if cfg.prioritised:
        drawn = prioritised.sample(buffer, key, cfg.batch_size, cfg.window_length, 1, stride)
        windows = drawn.window
    else:
        windows = replay.sample_windows(buffer, key, cfg.batch_size, cfg.window_length, stride)
    bootstrap = bootstrap_values(parts, target_params, windows)  # the bootstrap values come from the target network
    windows, bootstrap = reanalyse(cfg, parts.network, params, target_params, windows, bootstrap,
                                   jax.random.fold_in(key, 1))
    batch = batch_from_windows(parts, target_params, windows, bootstrap)
    if not cfg.prioritised:
        return batch
    return batch._replace(weight=prioritised.importance_weights(drawn.probability, cfg.importance_exponent),
                          index=drawn.index)


def _sgd_step(parts: MuZeroParts, stride: int, buffer, carry, key: Array):
    """One Adam step on `batch_size` windows sampled from `buffer`, then the target update
    (`off_policy.target_sgd_step`; prioritised: the drawn windows' new priorities too); a `lax.scan`
    body over `(params, MuZeroLearnerState)` (prioritised: with the replay's `Priorities`)."""
    return target_sgd_step(parts, functools.partial(_batch, parts, stride), buffer, carry, key)


def _sgd_step_for(parts: MuZeroParts, envs_per_shard: int):
    """`_sgd_step` for a rollout of `envs_per_shard` envs (one env's steps lie that many slots apart)."""
    return functools.partial(_sgd_step, parts, envs_per_shard)


def _items(parts: MuZeroParts, traj: Trajectory):
    """The rollout's `T * B` `Step`s, rewards clipped: flattened time-major, or (prioritised) `[T, B]` as
    `prioritised.SequenceItems` with no start state."""
    steps = rollout_steps(traj, learner_rewards(traj.reward, parts.config.reward_clip, 1.0),
                          stores_search_value(parts.config))
    if not parts.config.prioritised:
        return steps
    t, b = traj.reward.shape
    return prioritised.SequenceItems(jax.tree.map(lambda x: x.reshape((t, b) + x.shape[1:]), steps), ())


def _hand_on(train_state: TrainState, params, traj: Trajectory):
    """The learned params as they are; metric "search_value" (the rollout's mean root value)."""
    del train_state
    return params, {"search_value": jnp.mean(traj.agent_extras["search_value"])}


def replay_pieces(parts: MuZeroParts) -> ReplayPieces:
    """MuZero's pieces of `podrl.agents.off_policy.replay_update`. Its metrics: the loss's (0 before
    learning starts), learning, replay_fill, search_value, learning_rate."""
    cfg = parts.config
    add = functools.partial(prioritised.add, window=cfg.window_length, period=1,
                            priority_exponent=cfg.priority_exponent)
    return ReplayPieces(cfg, cfg.min_fill, functools.partial(_items, parts), functools.partial(_sgd_step_for, parts),
                        _all_params, _hand_on, parts.learning_rate, add if cfg.prioritised else replay.add)


def _all_params(params):
    """The gradient steps move all of MuZero's params (actors need nothing else)."""
    return params
