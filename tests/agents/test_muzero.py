"""MuZero in the layouts: config and env refusals before compiling, Anakin/Sebulba parity (params
and sequence buffers), learning in both layouts (Gumbel and classic MuZero search)."""

from __future__ import annotations

import time

import jax
import numpy as np
import pytest

from parity import anakin_sebulba_states, max_diffs, sebulba_threads
from podrl.agents.muzero import MuZeroConfig
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.core.errors import ConfigError
from podrl.envs.registry import make
from podrl.envs.types import env_spec
from podrl.run.config import LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba

QUIET = LoggingConfig(run_dir=None, console=False)


@pytest.mark.parametrize("overrides, field", [
    (dict(search="alphazero"), "search"), (dict(num_simulations=0), "num_simulations"),
    (dict(unroll_steps=0), "unroll_steps"), (dict(td_steps=1.5), "td_steps"), (dict(support_size=0), "support_size"),
    (dict(dynamics_sizes=(64, -1)), "dynamics_sizes"), (dict(gamma=1.5), "gamma"),
    (dict(dirichlet_fraction=2.0), "dirichlet_fraction"), (dict(min_fill=10**9), "min_fill"),
    (dict(torso="resnet"), "torso"), (dict(value_loss_weight=0.0), "value_loss_weight"),
])
def test_invalid_fields_are_named(overrides, field):
    with pytest.raises(ConfigError) as info:
        MuZeroConfig(**overrides)
    assert info.value.field == field


def test_layout_mismatches_and_continuous_actions_are_refused_before_compiling(cpu_devices):
    """min_fill below one window per env, a buffer that is not whole time steps, Pendulum's
    continuous actions: each named, each raised before anything is traced (well under a second)."""
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="use min_fill >= 80") as info:
        train_anakin(AnakinConfig(env="MatchCue-v0", num_envs=8, rollout_length=16, total_steps=8 * 16 * 2,
                                  num_devices=1, logging=QUIET), MuZeroConfig(min_fill=64))
    assert info.value.field == "min_fill"
    with pytest.raises(ConfigError, match="not a multiple of the 6 envs") as info:
        MuZeroConfig(buffer_size=1000).check_batch(16, 6)
    assert info.value.field == "buffer_size"
    with pytest.raises(ConfigError, match="'muzero'") as info:
        MuZeroConfig().make_agent(env_spec(make("Pendulum-v1")), 10)
    assert info.value.field == "env"
    assert time.perf_counter() - started < 5.0


SMALL = dict(min_fill=128, buffer_size=1024, batch_size=16, replay_ratio=1 / 64, unroll_steps=3, td_steps=2)
"""Learning from the first update: 2 gradient steps per 128-step update (plumbing, not learning)."""


@pytest.mark.timeout(400)
def test_parity_with_anakin_same_seed_params_and_buffers(cpu_devices):
    """lag=0, one actor thread, MatchCue through the host adapter, one learner device: the same
    params and the same sequence buffer (observations, actions, rewards, search policies) as Anakin.
    Gumbel search only (the classic search passed it too, 155 s more on the loaded 2-core machine)."""
    anakin, sebulba = anakin_sebulba_states(MuZeroConfig(search="gumbel", **SMALL), U=3, env="MatchCue-v0")
    a, s = anakin.shard_state, sebulba.shard_state
    assert int(s.size[0]) == int(a.size[0]) == 3 * 16 * 8
    for name in ("observation", "action", "discount", "truncated", "next_observation"):
        np.testing.assert_array_equal(getattr(a.data, name), getattr(s.data, name))
    np.testing.assert_allclose(a.data.reward, s.data.reward, atol=1e-6)
    np.testing.assert_allclose(a.data.policy, s.data.policy, atol=1e-5)
    diffs = max_diffs(jax.tree.leaves(anakin.params), jax.tree.leaves(sebulba.params))
    assert max(diffs) < 1e-5, diffs
    moved = max_diffs(jax.tree.leaves(anakin.params), jax.tree.leaves(anakin.opt_state.target))
    assert max(moved) > 1e-4  # it learned (the target lags behind the online network)


# -------------------------------------------------------------------- learning

CUE = dict(learning_rate=3e-3, replay_ratio=0.5)
"""MatchCue learners: the defaults (8 simulations, K = 5, n = 5) with a larger step size and 64 gradient steps of
64 windows per 128-step update (the reward model's cue x action table leaves its plateau after ~1-2k steps)."""
CUE_STEPS = 8 * 16 * 64


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_gumbel_muzero_learns_match_cue_through_anakin(cpu_devices):
    """MatchCue-v0 (name the one-hot cue; optimum 16, uniform random 4), 8 envs x 16 steps, one device,
    8,192 steps. The untrained greedy search returns 4.06 (seed 0, 32 episodes, measured with learning held
    off by min_fill; zero-initialised heads make every action look alike)."""
    config = AnakinConfig(env="MatchCue-v0", num_envs=8, rollout_length=16, total_steps=CUE_STEPS, num_devices=1,
                          updates_per_call=16, eval_every=16, eval_episodes=32, stop_at_return=12.0,
                          logging=QUIET)  # stops at the first evaluation >= 12
    result = train_anakin(config, MuZeroConfig(search="gumbel", **CUE))
    assert result.final_eval_return[0] >= 12.0, result.final_eval_return


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_muzero_learns_match_cue_under_sebulba(cpu_devices):
    """MatchCue-v0 through the JAX host adapter, the classic MuZero search (PUCT, Dirichlet noise), 1 actor
    device, 1 learner device, asynchronous params (the actor takes the newest version; lag 0 is the parity
    test's, lag 1 the 2-process test's), 8,192 steps; the untrained greedy search returns 3.78 (32 episodes,
    measured the same way)."""
    config = SebulbaConfig(env="jax:MatchCue-v0", total_steps=CUE_STEPS, envs_per_thread=8, rollout_length=16,
                           lag="async", actor_devices=(0,), learner_devices=(1,), log_every=16, eval_every=16,
                           eval_episodes=32, stop_at_return=12.0, logging=QUIET)  # stops at the first evaluation >= 12
    result = train_sebulba(config, MuZeroConfig(search="muzero", **CUE))
    assert result.final_eval_return >= 12.0, result.history[-1]
    assert not sebulba_threads()
