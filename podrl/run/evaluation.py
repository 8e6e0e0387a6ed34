"""Greedy-policy evaluation on a batch of fresh JAX env instances."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from podrl.core.finite import no_legal_flags, nonfinite_flags
from podrl.core.parallel import match_varying, vary_like
from podrl.core.types import Agent, Array, Params, PRNGKey, reset_finished_actor_state
from podrl.envs.types import LAST, JaxEnv, TimeStep
from podrl.envs.wrappers import EpisodeStats


class EvalResult(NamedTuple):
    returns: Array  # float32 [N], undiscounted return of each episode
    lengths: Array  # int32 [N]
    finished: Array  # bool [N], False where the episode hit `max_steps` first
    bad_reward: Array  # bool [N], the episode met a NaN/Inf reward (`podrl.core.finite.check_evaluation`)
    bad_observation: Array  # bool [N], the episode met a NaN/Inf float observation
    no_legal: Array  # bool [N], the policy was asked to act on an observation whose action_mask allows nothing


class _GreedyLoop(NamedTuple):
    """The while-loop carry of `evaluate_greedy` (`N` envs)."""

    t: Array  # int32 [], steps taken
    env_state: Any  # [N, ...]
    timestep: TimeStep  # [N, ...]
    actor_state: Any  # [N, ...] or ()
    done: Array  # bool [N], the episode has ended
    returns: Array  # float32 [N], frozen once done
    lengths: Array  # int32 [N], frozen once done
    bad_reward: Array  # bool [N], a live step's reward was NaN/Inf
    bad_observation: Array  # bool [N], a live step's float observation was NaN/Inf
    no_legal: Array  # bool [N], a live step's observation to act on had an all-False action_mask


def evaluate_greedy(agent: Agent, env: JaxEnv, params: Params, keys: PRNGKey, max_steps: int) -> EvalResult:
    """Runs one greedy episode per key (`keys` `[N]`), all envs stepped together.

    Jittable; stops when every episode has ended or after `max_steps` steps.
    `env` must not auto-reset (pass the env as `podrl.envs.make` returns it).
    """
    env = EpisodeStats(env)
    num = keys.shape[0]
    env_state, timestep = jax.vmap(env.reset)(keys)
    zeros = jnp.zeros((num,), jnp.float32)
    start = _GreedyLoop(t=jnp.asarray(0, jnp.int32), env_state=env_state, timestep=timestep,
                        actor_state=agent.init_actor_state(num), done=jnp.zeros((num,), jnp.bool_),
                        returns=zeros, lengths=jnp.zeros((num,), jnp.int32),
                        bad_reward=jnp.zeros((num,), jnp.bool_), bad_observation=jnp.zeros((num,), jnp.bool_),
                        no_legal=jnp.zeros((num,), jnp.bool_))

    def cond(carry: _GreedyLoop):
        return (carry.t < max_steps) & ~jnp.all(carry.done)

    def body(carry: _GreedyLoop):
        action, actor_state = agent.act_greedy(params, carry.actor_state, carry.timestep.observation)
        env_state, timestep = jax.vmap(env.step)(carry.env_state, action)
        live = ~carry.done
        no_legal = no_legal_flags(jnp, carry.timestep.observation, (num,))
        bad_reward, bad_observation = nonfinite_flags(jnp, timestep.reward, timestep.observation)
        return match_varying(_GreedyLoop(
            t=carry.t + 1, env_state=env_state, timestep=timestep, actor_state=actor_state,
            done=carry.done | timestep.last(),
            returns=jnp.where(live, timestep.extras["episode_return"], carry.returns),
            lengths=jnp.where(live, timestep.extras["episode_length"], carry.lengths),
            bad_reward=carry.bad_reward | (live & bad_reward),
            bad_observation=carry.bad_observation | (live & bad_observation),
            no_legal=carry.no_legal | (live & no_legal),
        ), carry)

    end = jax.lax.while_loop(cond, body, vary_like(start, jax.random.key_data(keys)))
    return EvalResult(returns=end.returns, lengths=end.lengths, finished=end.done, bad_reward=end.bad_reward,
                      bad_observation=end.bad_observation, no_legal=end.no_legal)



def evaluate_host_greedy(agent: Agent, params: Params, env, seed: int, max_steps: int) -> EvalResult:
    """One greedy episode per env of a `HostVectorEnv` (numpy); the first episode of each env counts.

    `params` should live on the device that runs the policy.
    """
    act = jax.jit(agent.act_greedy)
    timestep = env.reset(seed)
    num = env.num_envs
    initial_actor_state = actor_state = agent.init_actor_state(num)
    returns, lengths = np.zeros(num, np.float32), np.zeros(num, np.int32)
    done = np.zeros(num, np.bool_)
    bad_reward, bad_observation, no_legal = np.zeros(num, np.bool_), np.zeros(num, np.bool_), np.zeros(num, np.bool_)
    for _ in range(max_steps):
        no_legal |= ~done & no_legal_flags(np, timestep.observation, (num,))
        action, actor_state = act(params, actor_state, timestep.observation)
        timestep = env.step(np.asarray(action))
        lost_life = np.asarray(timestep.discount) == 0  # episodic life: the learning episode restarts, as in training
        actor_state = reset_finished_actor_state(actor_state, lost_life, initial_actor_state)
        live = ~done
        returns = np.where(live, timestep.extras["episode_return"], returns)
        lengths = np.where(live, timestep.extras["episode_length"], lengths)
        step_reward, step_observation = nonfinite_flags(np, np.asarray(timestep.reward), timestep.observation)
        bad_reward |= live & step_reward
        bad_observation |= live & step_observation
        done |= np.asarray(timestep.step_type) == LAST
        if done.all():
            break
    return EvalResult(returns=returns, lengths=lengths, finished=done, bad_reward=bad_reward,
                      bad_observation=bad_observation, no_legal=no_legal)
