"""R2D2 in the layouts: config and env refusals, Ape-X epsilons by global env column in both layouts,
the replay's memory check, Anakin/Sebulba parity (params, replay, priorities), exact resume with the
replay and its priorities, and the memory task learned in both layouts. The sequences themselves:
test_r2d2_sequences.py; the replay: test_prioritised.py."""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
import pytest

from checkpoints import anakin as checkpointed_anakin
from checkpoints import leaves
from parity import anakin_sebulba_states, max_diffs, sebulba_threads
from podrl.agents.r2d2 import R2D2Config, apex_epsilons
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.core.errors import ConfigError
from podrl.core.types import EnvColumns
from podrl.envs.registry import make
from podrl.envs.types import env_spec
from podrl.run.config import LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba

QUIET = LoggingConfig(run_dir=None, console=False)


@pytest.mark.parametrize("overrides, field", [
    (dict(core="none"), "core"), (dict(core_size=0), "core_size"), (dict(burn_in=-1), "burn_in"),
    (dict(sequence_length=0), "sequence_length"), (dict(sequence_period=1.5), "sequence_period"),
    (dict(n_step=0), "n_step"), (dict(gamma=1.5), "gamma"), (dict(priority_eta=2.0), "priority_eta"),
    (dict(epsilon=-0.1), "epsilon"), (dict(epsilon_alpha=-1.0), "epsilon_alpha"), (dict(dueling=1), "dueling"),
    (dict(head_hidden=-1), "head_hidden"), (dict(importance_exponent=1.5), "importance_exponent"),
    (dict(priority_exponent=-1.0), "priority_exponent"), (dict(min_fill=10**9), "min_fill"),
    (dict(target_tau=0.0), "target_tau"), (dict(torso="resnet"), "torso"),
])
def test_invalid_fields_are_named(overrides, field):
    with pytest.raises(ConfigError) as info:
        R2D2Config(**overrides)
    assert info.value.field == field


def test_layout_mismatches_and_continuous_actions_are_refused():
    """A period that does not divide the rollout, a replay that is not whole rows of period x envs, a
    min_fill below one sequence of each env: each named; Pendulum's continuous actions too."""
    config = R2D2Config(burn_in=4, sequence_length=8, sequence_period=4, buffer_size=4096, min_fill=256)
    for (t, b), field, words in [((18, 8), "sequence_period", "does not divide the rollout length 18"),
                                 ((16, 6), "buffer_size", "not whole rows of period x envs per shard = 4 x 6"),
                                 ((16, 32), "min_fill", "use min_fill >= 384")]:
        with pytest.raises(ConfigError, match=words) as info:
            config.check_batch(t, b)
        assert info.value.field == field
    config.check_batch(16, 8)
    with pytest.raises(ConfigError, match="'r2d2'") as info:
        R2D2Config().make_agent(env_spec(make("Pendulum-v1")), 10)
    assert info.value.field == "env"


def test_apex_epsilons_follow_the_global_env_column():
    """eps_i = 0.4^(1 + 7 i / (N - 1)) (Horgan et al. 2018) by global column i of N, so a column keeps its
    epsilon however the envs are split; one column uses eps itself; evaluation (no columns) acts greedily."""
    want = 0.4 ** (1 + 7 * np.arange(8) / 7)
    np.testing.assert_allclose(np.asarray(apex_epsilons(EnvColumns(np.arange(8, dtype=np.int32), 8), 0.4, 7.0)), want,
                               rtol=1e-6)
    halves = [apex_epsilons(EnvColumns(np.arange(4, dtype=np.int32) + first, 8), 0.4, 7.0) for first in (0, 4)]
    np.testing.assert_allclose(np.concatenate(halves), want, rtol=1e-6)
    assert float(apex_epsilons(EnvColumns(np.zeros(1, np.int32), 1), 0.4, 7.0)[0]) == pytest.approx(0.4)
    spec = env_spec(make("RecallCue-v0"))
    agent = R2D2Config().make_agent(spec, 10)
    params = agent.init(jax.random.key(0), spec).params
    state = agent.init_actor_state(3, EnvColumns(np.array([0, 5, 7], np.int32), 8))
    np.testing.assert_allclose(np.asarray(state.epsilon), want[[0, 5, 7]], rtol=1e-6)
    greedy = [agent.act_greedy(params, state, np.eye(3, 3, dtype=np.float32))[0] for _ in range(2)]
    np.testing.assert_array_equal(greedy[0], greedy[1])


@dataclasses.dataclass(frozen=True)
class ColumnsSeen(R2D2Config):
    """R2D2 whose `init_actor_state` records the (concrete) env columns a Sebulba actor thread is made for
    (in `SEEN`); it learns as R2D2 does."""

    def make_agent(self, env_spec, total_updates):
        agent = super().make_agent(env_spec, total_updates)

        def init_actor_state(batch_size, columns=None):
            if columns is not None:
                SEEN.append((np.asarray(columns.index).tolist(), columns.total))
            return agent.init_actor_state(batch_size, columns)

        return agent._replace(init_actor_state=init_actor_state)


SEEN: list[tuple[list[int], int]] = []


def test_a_replay_too_big_for_the_device_is_refused_before_compiling(cpu_devices):
    """CartPole steps take 45 bytes (two 4-float observations, action, reward, discount, a truncation flag), each
    of the 2.5e11 sequences an LSTM-64 state (512 bytes), the sum tree 2 x 2^38 float32: refused with the
    bytes, naming buffer_size, before anything is allocated."""
    sequences = 10**12 // 4
    need = 45 * 10**12 + 8 + 512 * sequences + 4 * 2 * 2 ** math.ceil(math.log2(sequences)) + 4
    with pytest.raises(ConfigError, match=f"{need:,} bytes") as info:
        train_anakin(AnakinConfig(env="CartPole-v1", num_envs=4, rollout_length=4, total_steps=64, num_devices=1,
                                  logging=QUIET), R2D2Config(buffer_size=10**12))
    assert info.value.field == "buffer_size" and "GiB" in str(info.value)


SMALL = dict(core_size=32, buffer_size=1024, min_fill=128, batch_size=16, replay_ratio=1 / 64)
"""Learning from the second update of 128 steps, 2 gradient steps an update (plumbing, not learning)."""


@pytest.mark.timeout(300)
def test_parity_with_anakin_same_seed_params_replay_and_priorities(cpu_devices):
    """lag=0, one actor thread, RecallCue through the host adapter, one learner device: the same params, the
    same replay (steps, the core states stored at the sequence starts) and the same priorities as Anakin."""
    anakin, sebulba = anakin_sebulba_states(R2D2Config(**SMALL), U=3, env="RecallCue-v0")
    a, s = anakin.shard_state, sebulba.shard_state
    assert int(s.size[0]) == int(a.size[0]) == 3 * 16 * 8
    for name in ("observation", "action", "discount", "truncated", "next_observation"):
        np.testing.assert_array_equal(getattr(a.steps.data, name), getattr(s.steps.data, name))
    np.testing.assert_allclose(a.steps.data.reward, s.steps.data.reward, atol=1e-6)
    assert max(max_diffs(jax.tree.leaves(a.start_state), jax.tree.leaves(s.start_state))) < 1e-5
    np.testing.assert_allclose(a.priorities.tree.nodes, s.priorities.tree.nodes, rtol=1e-4, atol=1e-6)
    drawable = a.priorities.tree.nodes[0, a.priorities.tree.nodes.shape[-1] // 2:]
    assert (drawable > 0).sum() > 50 and (drawable[drawable > 0] < 0.99).any()  # new at 1, the drawn ones set lower
    diffs = max_diffs(jax.tree.leaves(anakin.params), jax.tree.leaves(sebulba.params))
    assert max(diffs) < 1e-5, diffs
    moved = max_diffs(jax.tree.leaves(anakin.params), jax.tree.leaves(anakin.opt_state.target))
    assert max(moved) > 1e-4  # it learned (the target lags behind the online network)


@pytest.mark.timeout(300)
def test_anakin_stop_resume_with_the_replay_is_bit_identical(tmp_path, cpu_devices):
    """Two learner devices, so two replays; both, with their priorities and stored core states, are
    checkpointed and restored exactly. Shard d's actors keep the epsilons of their global columns."""
    agent = R2D2Config(core_size=16, buffer_size=1024, min_fill=256, batch_size=8, replay_ratio=1 / 32)
    whole = train_anakin(checkpointed_anakin(tmp_path, "whole"), agent)
    first = train_anakin(checkpointed_anakin(tmp_path, "part", stop_after_updates=4), agent)
    rest = train_anakin(checkpointed_anakin(tmp_path, "rest", resume=str(tmp_path / "part")), agent)
    assert [r["updates"] for r in rest.history] == [7, 10]
    # 64 steps per shard and update: min_fill 256 holds learning back for updates 0-2 (the first call)
    assert float(first.history[0]["train/learning"][0]) == 0.0
    assert float(rest.history[-1]["train/learning"][0]) == 1.0 and float(rest.history[-1]["train/q_loss"][0]) > 0.0
    replays = rest.state.train_state.shard_state
    assert replays.steps.data.observation.shape == (1, 2, 1024, 4) and int(replays.size[0, 1]) == 10 * 16 * 4
    assert not np.array_equal(replays.priorities.tree.nodes[0, 0], replays.priorities.tree.nodes[0, 1])
    np.testing.assert_allclose(rest.state.acting.actor_state.epsilon[0], 0.4 ** (1 + 7 * np.arange(8) / 7),
                               rtol=1e-6)
    for a, b in zip(leaves(whole.state), leaves(rest.state), strict=True):  # replays, priorities, target, params
        np.testing.assert_array_equal(a, b)


# -------------------------------------------------------------------- learning

MEMORY_STEPS = 16 * 16 * 30
"""30 updates of 16 envs x 16 steps: the default R2D2 answers RecallCue right on 3 of 3 seeds (0-2) tried in
both layouts by then (Anakin ~15 s on the 2-core machine)."""


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_r2d2_solves_the_memory_task_through_anakin(cpu_devices):
    """RecallCue-v0 (a cue shown once, asked for 4 steps later; +1 right, -1 wrong, 0 for any memoryless
    policy), 16 envs x 16 steps, one device, 7,680 steps. The untrained greedy policy returns -0.31, 0.03,
    -0.16 (seeds 0-2, 64 episodes, tests/untrained.py)."""
    config = AnakinConfig(env="RecallCue-v0", num_envs=16, rollout_length=16, total_steps=MEMORY_STEPS, num_devices=1,
                          updates_per_call=10, eval_every=10, eval_episodes=64, stop_at_return=0.9,
                          logging=QUIET)  # stops at the first evaluation >= 0.9
    result = train_anakin(config, R2D2Config())
    assert result.final_eval_return[0] >= 0.9, result.final_eval_return


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_r2d2_solves_the_memory_task_under_sebulba(cpu_devices):
    """RecallCue-v0 through the JAX host adapter, 2 actor threads of 8 envs on 1 actor device, 1 learner
    device, lag 1, 7,680 steps (3 of 3 seeds, 0-2, solved); the untrained greedy policy returns -0.06, 0.03,
    0.0 (seeds 0-2, 64 episodes, tests/untrained.py). Thread j's actors are the env columns 8j .. 8j + 7 of
    16, as Anakin's shards number theirs (test_anakin_stop_resume_with_the_replay_is_bit_identical), so each
    keeps its column's Ape-X epsilon."""
    SEEN.clear()
    config = SebulbaConfig(env="jax:RecallCue-v0", total_steps=MEMORY_STEPS, threads_per_actor_device=2,
                           envs_per_thread=8, rollout_length=16, lag="1", actor_devices=(0,), learner_devices=(1,),
                           log_every=10, eval_episodes=64, logging=QUIET)
    result = train_sebulba(config, ColumnsSeen())
    assert result.final_eval_return >= 0.9, result.history[-1]
    assert sorted(SEEN) == [(list(range(8)), 16), (list(range(8, 16)), 16)]
    assert not sebulba_threads()
