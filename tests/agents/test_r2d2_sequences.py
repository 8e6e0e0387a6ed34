"""R2D2's replayed sequences against the actor and a NumPy transcription of the paper's targets: the stored
recurrent state, the burn-in and the n-step double-Q targets with value rescaling, aligned across
terminations and truncations, and the priorities an update sets; injected off-by-ones fail."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrl.envs
from podrl.agents import prioritised, sum_tree
from podrl.agents.r2d2 import R2D2Config, losses
from podrl.agents.r2d2 import agent as r2d2_agent
from podrl.agents.replay import n_step_targets
from podrl.agents.unroll import reset_before
from podrl.agents.value_rescaling import inverse_value_transform, value_transform
from podrl.anakin.rollout import reset_batch, rollout
from podrl.core.learner_state import shard_global, shard_local
from podrl.core.types import Trajectory
from podrl.envs.wrappers import TimeLimit, wrap_for_training
from podrl.testing import layout_update

T, B, ROLLOUTS = 12, 4, 4
CONFIG = R2D2Config(core_size=16, hidden_sizes=(16,), burn_in=3, sequence_length=6, sequence_period=3, n_step=3,
                    gamma=0.9, buffer_size=ROLLOUTS * T * B, min_fill=T * B, batch_size=256, replay_ratio=1 / 48,
                    target_update_period=1000)
"""Sequences of 3 + 6 steps every 3 steps; 4 rollouts of 12 steps fill the replay (no wrap: test_prioritised)."""


@functools.lru_cache(maxsize=1)
def replayed():
    """`(parts, params, steps, buffer)`: CartPole cut at 12 steps (so episodes terminate and truncate), the
    untrained R2D2 acting for 4 rollouts of 12 steps in 4 envs, what it saw and did (`steps`: [48, B]
    arrays and the core states it acted from), and the replay the agent filled with those rollouts."""
    env = TimeLimit(podrl.envs.make("CartPole-v1"), 12)
    spec = podrl.envs.env_spec(env)
    parts = r2d2_agent.make_parts(CONFIG, spec, 10)
    agent = CONFIG.make_agent(spec, 10)
    state = agent.init(jax.random.key(0), spec)
    run = jax.jit(lambda s, k: rollout(agent, wrap_for_training(env), state.params, s, k, T))
    acting = reset_batch(wrap_for_training(env), agent, jax.random.split(jax.random.key(1), B))
    pieces, buffer, rollouts = r2d2_agent.replay_pieces(parts), state.shard_state, []
    for i in range(ROLLOUTS):
        acting, traj, _ = run(acting, jax.random.key(10 + i))
        buffer = jax.jit(pieces.add)(buffer, pieces.items(traj))
        rollouts.append(traj)
    steps = jax.tree.map(lambda *x: np.concatenate([np.asarray(a) for a in x]), *rollouts)
    return parts, state.params, steps, buffer


def drawn_batch(parts, params, buffer) -> losses.R2D2Batch:
    return jax.jit(functools.partial(r2d2_agent._batch, parts, B))(buffer, jax.random.key(3), params, params)


def actor_q(parts, params, steps: Trajectory) -> tuple[np.ndarray, np.ndarray]:
    """`(q [48, B, A], q_next [48, B, A])`: the Q values the actor computed at each step from the state it
    held, and those of o'_t seen with the state after step t (before any reset)."""
    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
    carry = jax.tree.map(flat, steps.agent_extras["core_state"])
    q, after = parts.network.apply(params, flat(steps.observation), carry)
    q_next, _ = parts.network.apply(params, flat(steps.next_observation), after)
    return np.asarray(q).reshape(steps.reward.shape + (-1,)), np.asarray(q_next).reshape(steps.reward.shape + (-1,))


def numpy_targets(steps: Trajectory, q_next: np.ndarray, start: int, column: int) -> np.ndarray:
    """R2D2's targets (Kapturowski et al. 2019, sec. 2) of the learned steps of the sequence starting at
    step `start` of env `column`: y_t = h(sum_{k<m} gamma^k r_{t+k} + gamma^m prod(discounts)
    h^-1(Q'(o'_{t+m-1}, argmax Q'))), m <= n steps, cut after an episode end and at the sequence's end."""
    end = start + CONFIG.window
    ys = []
    for t in range(start + CONFIG.burn_in, end):
        ret, weight, k = 0.0, 1.0, t
        while True:
            ret += weight * float(steps.reward[k, column])
            weight *= CONFIG.gamma * float(steps.discount[k, column])
            ended = bool(steps.discount[k, column] == 0 or steps.truncated[k, column])
            if ended or k + 1 - t == CONFIG.n_step or k + 1 == end:
                break
            k += 1
        q = q_next[k, column]
        ys.append(float(value_transform(ret + weight * inverse_value_transform(jnp.float32(q[np.argmax(q)])))))
    return np.array(ys)


def alignment_errors(parts, params, steps, buffer) -> dict[str, float]:
    """Largest gaps, over the drawn sequences, between what the learner builds and the actor / NumPy:
    the stored start state, the window, the online Q after the burn-in, the targets."""
    batch = drawn_batch(parts, params, buffer)
    index = np.asarray(batch.index)
    start, column = (index // B) * CONFIG.sequence_period, index % B
    window = start[:, None] + np.arange(CONFIG.window)[None, :]  # [N, W] steps
    q, q_next = actor_q(parts, params, steps)
    q_taken, y = jax.jit(functools.partial(losses.learned_q_and_targets, CONFIG, parts.network))(params, batch)
    learned = window[:, CONFIG.burn_in:]
    actor_taken = np.take_along_axis(q[learned, column[:, None]], steps.action[learned, column[:, None]][..., None],
                                     axis=-1)[..., 0]
    want_y = np.stack([numpy_targets(steps, q_next, s, c) for s, c in zip(start[:64], column[:64])])
    stored = [np.abs(np.asarray(a) - x[start, column]).max()
              for a, x in zip(jax.tree.leaves(batch.start_state), jax.tree.leaves(steps.agent_extras["core_state"]))]
    return {"state": max(stored),
            "window": float(np.abs(np.asarray(batch.window.observation).transpose(1, 0, 2)
                                   - steps.observation[window, column[:, None]]).max()),
            "q": float(np.abs(np.asarray(q_taken).T - actor_taken).max()),
            "targets": float(np.abs(np.asarray(y).T[:64] - want_y).max())}


def test_stored_state_burn_in_and_targets_align_with_the_actor_across_episode_ends():
    """Every drawn sequence starts from the core state the actor held at its first step; the online core,
    warmed up over the burn-in from it, reproduces the actor's Q at every learned step (resetting where
    episodes ended); the targets equal the NumPy transcription (terminations cut to the reward,
    truncations bootstrap from the true next observation). The sampled learned steps cross both kinds of
    episode end and start from non-zero stored states."""
    parts, params, steps, buffer = replayed()
    batch = drawn_batch(parts, params, buffer)
    window = jax.tree.map(lambda x: np.asarray(x)[CONFIG.burn_in:], batch.window)  # the learned steps
    learned = window.truncated | (window.discount == 0)
    assert window.truncated.any() and (window.discount == 0).any()
    assert learned[:-1].any()  # an episode ends inside a learned part: its next steps need the reset
    assert max(np.abs(np.asarray(x)).max() for x in jax.tree.leaves(batch.start_state)) > 1e-2
    errors = alignment_errors(parts, params, steps, buffer)
    assert errors["state"] == 0.0 and errors["window"] == 0.0, errors
    assert errors["q"] < 1e-5 and errors["targets"] < 1e-5, errors


@pytest.mark.parametrize("mutation", ["reset one step late", "n-step cut one step late",
                                      "stored state of the next sequence"])
def test_an_injected_off_by_one_breaks_the_alignment(monkeypatch, mutation):
    """The check above can fail: each injected off-by-one moves the learner's Q or targets off the actor's."""
    parts, params, steps, buffer = replayed()
    late = lambda end: jnp.concatenate([end[:1] & False, end[:-1]])  # noqa: E731
    if mutation == "reset one step late":
        monkeypatch.setattr(losses, "reset_before", lambda end: reset_before(late(end)))
    elif mutation == "n-step cut one step late":
        monkeypatch.setattr(losses, "n_step_targets", lambda r, d, end, n, g: n_step_targets(r, d, late(end), n, g))
    else:
        sample = prioritised.sample

        def next_state(replay, *args):
            drawn = sample(replay, *args)
            state = jax.tree.map(lambda store: store[drawn.index + B], replay.start_state)
            return drawn._replace(start_state=state)

        monkeypatch.setattr(r2d2_agent.prioritised, "sample", next_state)
    errors = alignment_errors(parts, params, steps, buffer)
    assert max(errors["q"], errors["targets"]) > 1e-3, errors


def test_an_update_sets_the_drawn_sequences_priorities_from_their_td_errors():
    """One update with one gradient step: the sequences it drew get (eta max|delta| + (1 - eta) mean|delta|)^alpha
    with delta = y - Q of that step's batch before the step (NumPy), the largest priority seen moves up, and
    every other sequence keeps the max-priority value it was added with."""
    parts, params, steps, buffer = replayed()
    spec = parts.env_spec
    agent = CONFIG.make_agent(spec, 10)
    state = agent.init(jax.random.key(0), spec)._replace(shard_state=buffer)
    last = jax.tree.map(lambda x: x[-T:], steps)
    traj = Trajectory(last.observation, last.action, last.reward, last.discount, last.truncated, last.next_observation,
                      last.agent_extras, jax.tree.map(lambda x: x[0], last.agent_extras["core_state"]))
    assert CONFIG.sgd_steps(T, B) == 1
    update = layout_update(agent, jax.devices()[:1])
    after, metrics = update(shard_global(state), traj, jax.random.key(7))
    after = shard_local(after)
    assert float(metrics["learning"]) == 1.0
    # the step's batch, as the frame draws it: the update adds the rollout, then step 0 samples with its key
    added = jax.jit(r2d2_agent.replay_pieces(parts).add)(buffer, r2d2_agent.replay_pieces(parts).items(traj))
    sample_key = jax.random.split(jax.random.split(jax.random.key(7), 1)[0])[0]
    batch = jax.jit(functools.partial(r2d2_agent._batch, parts, B))(added, sample_key, state.params, state.params)
    q_taken, y = jax.jit(functools.partial(losses.learned_q_and_targets, CONFIG, parts.network))(state.params, batch)
    td = np.abs(np.asarray(y) - np.asarray(q_taken))  # [m, N]
    priority = CONFIG.priority_eta * td.max(0) + (1 - CONFIG.priority_eta) * td.mean(0)
    leaves = np.asarray(sum_tree.leaves(after.shard_state.priorities.tree))
    index = np.asarray(batch.index)
    np.testing.assert_allclose(leaves[index], priority ** CONFIG.priority_exponent, rtol=1e-4)
    before = np.asarray(sum_tree.leaves(added.priorities.tree))
    untouched = np.setdiff1d(np.flatnonzero(before), index)
    np.testing.assert_array_equal(leaves[untouched], before[untouched])
    assert float(after.shard_state.priorities.max_priority) == pytest.approx(max(1.0, priority.max()), rel=1e-5)
