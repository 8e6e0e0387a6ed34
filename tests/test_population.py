"""Populations on the 2-D (population, data) mesh: sweeps, members that never mix, PBT, resume."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from agents.impala import ImpalaConfig
from agents.ppo import PPOConfig
from podrl.anakin import train_anakin
from podrl.config import AnakinConfig, LoggingConfig
from podrl.errors import ConfigError
from podrl.population import member_values, parse_sweep, pbt_decide

QUIET = LoggingConfig(run_dir=None, console=False)
LRS = (0.0, 3e-4, 1e-3, 3e-3)


def cartpole(**overrides) -> AnakinConfig:
    base = dict(env="CartPole-v1", num_envs=4, rollout_length=16, total_steps=4 * 16 * 4, updates_per_call=2,
                eval_every=0, eval_episodes=4, logging=QUIET)
    return AnakinConfig(**{**base, **overrides})


def member_params(result, i: int) -> list[np.ndarray]:
    return [np.asarray(x)[i] for x in jax.tree.leaves(result.state.train_state.params)]


def test_lr_sweep_members_equal_single_runs_and_never_mix(cpu_devices):
    """A 4-member lr sweep, 2 members per row of a 2 x 4 mesh (members share devices, each member's
    gradients are averaged over its row's 4 data shards): member i equals the single run with that
    lr and seed 0 + i on 4 devices. Members' gradients differ (different lrs and seeds), so any
    averaging across members would break the equality; the lr-0 member never moves at all."""
    sweep = ("agent.learning_rate=" + ",".join(str(lr) for lr in LRS),)
    pop = train_anakin(cartpole(population=4, population_shards=2, sweep=sweep), PPOConfig())
    assert pop.state.train_state.hyperparams["learning_rate"].shape == (4,)
    np.testing.assert_allclose(pop.history[-1]["hp/learning_rate"], np.float32(LRS))
    for i in (1, 3):  # two singles keep the test short; the lr-0 member is checked against its init below
        single = train_anakin(cartpole(seed=i, num_devices=4), PPOConfig(learning_rate=LRS[i]))
        for a, b in zip(member_params(pop, i), [np.asarray(x)[0] for x in
                                                jax.tree.leaves(single.state.train_state.params)]):
            np.testing.assert_allclose(a, b, atol=1e-5)
    init = train_anakin(cartpole(population=4, population_shards=2, sweep=sweep, total_steps=64), PPOConfig())
    # total_steps=64 is one update; the lr-0 member's params equal its init after any number of updates
    for a, b in zip(member_params(pop, 0), member_params(init, 0)):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(member_params(pop, 3)[0], member_params(init, 3)[0])


@pytest.mark.parametrize("sweep, population, field", [
    (("agent.learnin_rate=1e-3,1e-4",), 2, "sweep.learnin_rate"),  # unknown field
    (("agent.hidden_sizes=32,64",), 2, "sweep.hidden_sizes"),  # changes shapes
    (("agent.num_epochs=2,4",), 2, "sweep.num_epochs"),
    (("run.num_envs=4,8",), 2, "sweep.num_envs"),
    (("agent.anneal_lr=0,1",), 2, "sweep.anneal_lr"),  # a trace-time constant
    (("agent.gamma=0.9,1.5",), 2, "sweep.gamma"),  # out of range
    (("agent.learning_rate=fast",), 2, "sweep.learning_rate"),  # syntax
    (("agent.learning_rate=1e-3,1e-4,1e-5",), 2, "population"),  # more grid points than members
    (("agent.learning_rate=1e-3,1e-4,1e-5",), 3, "population"),  # 3 members on 2 population rows
])
def test_invalid_sweeps_fail_before_compiling_naming_the_field(cpu_devices, sweep, population, field):
    with pytest.raises(ConfigError) as info:  # syntax errors when the config is built, the rest in train_anakin
        train_anakin(cartpole(population=population, population_shards=2, sweep=sweep), PPOConfig())
    assert info.value.field == field, info.value


def test_population_config_errors_name_fields():
    with pytest.raises(ConfigError, match="^num_seeds"):
        cartpole(population=2, num_seeds=2)
    with pytest.raises(ConfigError, match="^population"):
        cartpole(sweep=("agent.learning_rate=1e-3,1e-4",))
    with pytest.raises(ConfigError, match="^pbt_every"):
        cartpole(population=2, pbt_every=4)
    with pytest.raises(ConfigError, match="^population_shards"):
        cartpole(population=2, population_shards=3).check_layout(8, PPOConfig())
    cartpole(population=2, num_envs=8, sweep=("agent.gamma=0.9,0.99",)).check_layout(8, ImpalaConfig())
    with pytest.raises(ConfigError, match="^sweep.clip_eps"):  # PPO's, not IMPALA's
        cartpole(population=2, num_envs=8, sweep=("clip_eps=0.1,0.2",)).check_layout(8, ImpalaConfig())


def test_sweep_values_grid_and_random_are_deterministic():
    axes = parse_sweep(("agent.entropy_coef=0.0,0.01", "agent.clip_eps=0.1,0.2", "learning_rate=loguniform:1e-4:1e-2"))
    values = member_values(axes, 8, seed=3)
    np.testing.assert_array_equal(values["entropy_coef"], np.float32([0, 0, .01, .01] * 2))
    np.testing.assert_array_equal(values["clip_eps"], np.float32([.1, .2] * 4))
    lr = values["learning_rate"]
    assert lr.shape == (8,) and np.all((lr >= 1e-4) & (lr <= 1e-2)) and len(set(lr.tolist())) == 8
    np.testing.assert_array_equal(lr, member_values(axes, 8, seed=3)["learning_rate"])


def test_pbt_decision_truncation_selection():
    fitness = np.array([1.0, 5.0, np.nan, 9.0, 3.0, 7.0, 2.0, 8.0])  # NaN (no episode) ranks last
    hp = {"learning_rate": np.arange(8, dtype=np.float32) + 1}
    d = pbt_decide(fitness, hp, 0.25, (0.8, 1.2), {"learning_rate": (0.0, 100.0)}, seed=0, update=10)
    assert sorted(d.replaced.tolist()) == [0, 2]  # the two worst
    assert all(d.source[i] in (3, 7) for i in (0, 2))  # copy one of the two best
    for i in (0, 2):
        parent_lr = hp["learning_rate"][d.source[i]]
        assert d.hyperparams["learning_rate"][i] in (np.float32(parent_lr * 0.8), np.float32(parent_lr * 1.2))
    kept = [i for i in range(8) if i not in (0, 2)]
    np.testing.assert_array_equal(d.hyperparams["learning_rate"][kept], hp["learning_rate"][kept])
    again = pbt_decide(fitness, hp, 0.25, (0.8, 1.2), {}, seed=0, update=10)
    np.testing.assert_array_equal(again.source, d.source)
