"""Populations on the 2-D (population, data) mesh: sweeps, members that never mix, PBT, resume."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from checkpoints import leaves
from podrl.agents.impala import ImpalaConfig
from podrl.agents.ppo import PPOConfig
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.core.errors import ConfigError
from podrl.core.population import member_values, parse_sweep, pbt_decide
from podrl.run.config import LoggingConfig

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
    import podrl.envs
    from podrl.core.keys import seed_keys
    from podrl.envs.types import env_spec

    spec = env_spec(podrl.envs.make("CartPole-v1"))
    agent = PPOConfig().make_agent(spec, 4)
    init = [jax.tree.leaves(agent.init(seed_keys(i).params, spec).params) for i in (0, 3)]
    for a, b in zip(member_params(pop, 0), init[0]):  # lr 0: still its init, bit for bit
        np.testing.assert_array_equal(a, np.asarray(b))
    assert not np.allclose(member_params(pop, 3)[0], np.asarray(init[1][0]))


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


def pbt_run(tmp_path, name: str, **checkpoint) -> AnakinConfig:
    """MatchSign, 4 members (lr 0 twice, 1e-3, 3e-3) on a 2 x 4 mesh, PBT every 2 updates: the bottom half
    copies the top half, lr times 0.5 or 2."""
    from podrl.run.config import CheckpointConfig

    return AnakinConfig(env="MatchSign-v0", num_envs=8, rollout_length=16, total_steps=8 * 16 * 8, updates_per_call=2,
                        eval_every=0, eval_episodes=8, population=4, population_shards=2, pbt_perturb=(0.5, 2.0),
                        sweep=("agent.learning_rate=0,0,1e-3,3e-3",), pbt_every=2, pbt_fraction=0.5,
                        logging=LoggingConfig(run_dir=str(tmp_path), run_name=name, console=False, tensorboard=False),
                        checkpoint=CheckpointConfig(**checkpoint))


@pytest.mark.timeout(300)
def test_pbt_copies_better_members_logs_lineage_and_resumes_exactly(tmp_path, cpu_devices):
    import json

    whole = train_anakin(pbt_run(tmp_path, "whole"), PPOConfig())
    part = train_anakin(pbt_run(tmp_path, "part", stop_after_updates=4), PPOConfig())
    # exploitation after update 4 (the state `part` ends with): the bottom half copied the top half
    record = part.history[-1]
    returns = np.asarray(record["episode_return"], np.float64)
    parents = np.asarray(record["pbt/parent"])
    replaced = np.flatnonzero(parents != np.arange(4))
    assert record["pbt/replaced"] == len(replaced) >= 1
    order = np.argsort(np.where(np.isfinite(returns), returns, -np.inf), kind="stable")
    for i in replaced:
        assert i in order[:2] and parents[i] in order[2:] and returns[parents[i]] > returns[i]
        ts = part.state.train_state
        for leaf in leaves((ts.params, ts.opt_state)):
            np.testing.assert_array_equal(leaf[i], leaf[parents[i]])
        lr = np.asarray(ts.hyperparams["learning_rate"])
        assert np.isclose(lr[i], record["hp/learning_rate"][parents[i]] * np.array([0.5, 2.0]), rtol=1e-6).any()
        np.testing.assert_allclose(lr, record["pbt/hp/learning_rate"])
    # the decision is the config's: its fraction, factors and seed at this update (podrl.core.population)
    decision = pbt_decide(returns, {"learning_rate": np.asarray(record["hp/learning_rate"], np.float32)}, 0.5,
                          (0.5, 2.0), {}, seed=0, update=record["updates"])
    np.testing.assert_array_equal(parents, decision.source)
    np.testing.assert_allclose(record["pbt/hp/learning_rate"], decision.hyperparams["learning_rate"], rtol=1e-6)
    # the lineage is in metrics.jsonl, at every PBT step but the last update
    lines = [json.loads(x) for x in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    assert [r["updates"] for r in lines if "pbt/parent" in r] == [2, 4, 6]
    assert all(len(r["hp/learning_rate_per_seed"]) == 4 for r in lines)
    # resuming the population (all members, hyperparameters, keys; PBT decides as before) is exact
    rest = train_anakin(pbt_run(tmp_path, "rest", resume=str(tmp_path / "part")), PPOConfig())
    assert [r["updates"] for r in rest.history] == [6, 8]
    assert rest.history[0]["pbt/parent"] == whole.history[2]["pbt/parent"]
    for a, b in zip(leaves(whole.state), leaves(rest.state), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.learning
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_pbt_median_beats_the_same_population_without_pbt(cpu_devices):
    """Half the population starts with learning rate 0 (it cannot learn). Without PBT the median
    member sits between those and the learners; with PBT (every 8 updates, bottom quarter copies
    the top quarter) the lr-0 members are replaced by perturbed copies of learners. Measured: median
    greedy return 421 with PBT, 123 without (CartPole, 48 updates)."""
    base = dict(env="CartPole-v1", num_envs=8, rollout_length=32, total_steps=8 * 32 * 48, updates_per_call=8,
                eval_every=0, eval_episodes=16, population=8, population_shards=2, logging=QUIET,
                sweep=("agent.learning_rate=0,2.5e-3,0,1e-3,0,2.5e-3,0,1e-3",))
    agent = PPOConfig(num_minibatches=2)
    plain = train_anakin(AnakinConfig(**base), agent)
    pbt = train_anakin(AnakinConfig(**base, pbt_every=8, pbt_fraction=0.25), agent)
    assert sum(r.get("pbt/replaced", 0) for r in pbt.history) >= 4
    assert np.all(np.asarray(pbt.state.train_state.hyperparams["learning_rate"]) > 0)
    plain_median, pbt_median = np.median(plain.final_eval_return), np.median(pbt.final_eval_return)
    # selection alone (no learning) could lift the median a little: demand learned returns too
    assert pbt_median >= 300 and pbt_median > plain_median + 50, (pbt.final_eval_return, plain.final_eval_return)


def test_plot_draws_population_lineage(tmp_path):
    import json
    import subprocess
    import sys

    run = tmp_path / "pop_run"
    run.mkdir()
    records = []
    for k in range(1, 7):
        rec = {"step": 100 * k, "wall_time": k, "sps": 1000.0, "episode_return": 10.0 * k,
               "episode_return_per_seed": [k, 2 * k, 3 * k, 4 * k], "hp/learning_rate": 1e-3,
               "hp/learning_rate_per_seed": [1e-4, 3e-4, 1e-3, 3e-3]}
        if k % 2 == 0:
            rec.update({"pbt/parent": [3, 1, 2, 3], "pbt/replaced": 1,
                        "pbt/hp/learning_rate": [2.4e-3, 3e-4, 1e-3, 3e-3]})
        records.append(rec)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "plots"
    result = subprocess.run([sys.executable, "-m", "podrl", "plot", str(run), "--out", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    figure = out / "population_pop_run.png"
    assert figure.is_file() and figure.stat().st_size > 15_000 and str(figure) in result.stdout
