"""`podrl.testing.check_agent` holds on every registered agent, and on broken agents fails at the rule they
break with its sentence; the layouts run its learner-shard rule before a user's agent trains on several
learner shards; `check_env` holds on podrl's JAX envs and names what a broken one breaks.

The broken agents are one tiny agent of this file (`LinearConfig`: a linear softmax policy learned by
REINFORCE with plain SGD, the same on every row), each with one mistake a researcher makes: gradients
summed over the learner shards or never reduced, a metric summed over them, a non-scalar metric, actions `[B, 1]`, an
actor
state without the batch axis (never reset by the layouts), actor-state rows mixed by a batch mean.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podrl.agents import AGENTS
from podrl.agents.config_base import AgentConfigBase
from podrl.agents.ppo import PPOConfig
from podrl.anakin import AnakinConfig, train_anakin
from podrl.core.parallel import learner_value_and_grad, sum_across_learners, vary_across_learners
from podrl.core.types import Agent, TrainState
from podrl.envs.registry import make
from podrl.run.config import LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba
from podrl.testing import RULES, AgentCheckError, EnvSpecMismatchError, check_agent, check_env
from podrl.testing.shards import is_builtin

TINY = {  # a small config of each registered agent, and an env it acts in
    "ppo": (dict(hidden_sizes=(8,), num_epochs=1, num_minibatches=2), "CartPole-v1"),
    "impala": (dict(hidden_sizes=(8,), num_minibatches=2), "CartPole-v1"),
    "pqn": (dict(hidden_sizes=(8,), num_epochs=1, num_minibatches=2), "CartPole-v1"),
    "dqn": (dict(hidden_sizes=(8,), buffer_size=64, min_fill=16, batch_size=8, replay_ratio=0.1), "CartPole-v1"),
    "sac": (dict(hidden_sizes=(8,), buffer_size=64, warmup_steps=16, batch_size=8, replay_ratio=0.1), "Pendulum-v1"),
    "td3": (dict(hidden_sizes=(8,), buffer_size=64, warmup_steps=16, batch_size=8, replay_ratio=0.1,
                 policy_delay=1), "Pendulum-v1"),
    "muzero": (dict(latent_size=8, num_simulations=2, max_num_considered_actions=2, buffer_size=64, min_fill=32,
                    batch_size=4, replay_ratio=0.05, unroll_steps=2, td_steps=2), "MatchCue-v0"),
    "r2d2": (dict(hidden_sizes=(8,), core_size=8, burn_in=0, sequence_length=4, sequence_period=4, buffer_size=64,
                  min_fill=32, batch_size=4, replay_ratio=0.05), "RecallCue-v0"),
}
"""The agents the suite checks: every registered one (a new agent adds its row)."""


def test_every_registered_agent_has_a_tiny_config():
    assert set(TINY) == set(AGENTS)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(TINY))
def test_check_agent_holds_on_every_registered_agent(name):
    fields, env = TINY[name]
    report = check_agent(AGENTS[name].config(**fields), env)
    assert report.passed == tuple(RULES) and report.skipped == ()
    assert report.notes == (), report.notes  # every config learns within the rule's updates


# ---------------------------------------------------------------- a tiny agent to break


@dataclasses.dataclass(frozen=True)
class LinearConfig(AgentConfigBase):
    """A linear softmax policy learned by REINFORCE with plain SGD, broken on purpose by its fields."""

    learning_rate: float = 0.5
    """SGD step size."""
    grads: str = "averaged"
    """averaged: through learner_value_and_grad; summed: a plain jax.value_and_grad (summed over the shards);
    local: each shard's own (never reduced)."""
    action: str = "row"
    """row: actions [B]; column: actions [B, 1]."""
    actor_state: str = "none"
    """none; counter: a step counter without the batch axis; mixed: a per-row carry mixed by a batch mean."""
    metrics: str = "shard"
    """shard: the shard's loss; summed: summed over the shards; vector: one loss per env."""

    def make_agent(self, env_spec, total_updates):
        return linear_agent(self, env_spec)


def linear_agent(config: LinearConfig, spec) -> Agent:
    size, actions = int(np.prod(spec.observation.shape)), spec.action.num_values

    def init(key, spec):
        params = {"w": 0.1 * jax.random.normal(key, (size, actions))}
        return TrainState(params, (), jnp.zeros((), jnp.int32))

    def init_actor_state(batch_size, columns=None):
        if config.actor_state == "counter":
            return {"t": jnp.zeros((), jnp.int32)}
        return {"h": jnp.zeros((batch_size, 1))} if config.actor_state == "mixed" else ()

    def logits_and_state(params, state, obs):
        x = obs.reshape(obs.shape[0], -1).astype(jnp.float32)
        logits = x @ params["w"]
        if config.actor_state == "counter":
            return logits, {"t": state["t"] + 1}
        if config.actor_state == "mixed":  # the batch mean lets other rows leak into a reset row
            h = 0.5 * state["h"] + jnp.mean(state["h"]) + x[:, :1]
            return logits + h, {"h": h}
        return logits, state

    def act(params, state, obs, key):
        logits, state = logits_and_state(params, state, obs)
        action = jax.random.categorical(key, logits)
        return (action[:, None] if config.action == "column" else action), {}, state

    def act_greedy(params, state, obs):
        logits, state = logits_and_state(params, state, obs)
        return jnp.argmax(logits, axis=-1), state

    def loss(params, traj):
        x = traj.observation.reshape(traj.reward.shape + (-1,)).astype(jnp.float32)
        log_pi = jax.nn.log_softmax(x @ params["w"])
        taken = jnp.take_along_axis(log_pi, traj.action.reshape(traj.reward.shape)[..., None], -1)[..., 0]
        per_env = -jnp.mean(taken * traj.reward, axis=0)  # [B]
        return jnp.mean(per_env), per_env

    def update(train_state, traj, key):
        grad_fn = jax.value_and_grad(loss, has_aux=True)
        if config.grads == "summed":
            (value, per_env), grads = grad_fn(train_state.params, traj)
        elif config.grads == "local":
            (value, per_env), grads = grad_fn(vary_across_learners(train_state.params), traj)
        else:
            (value, per_env), grads = learner_value_and_grad(grad_fn, train_state.params, traj)
        params = jax.tree.map(lambda p, g: p - config.learning_rate * g, train_state.params, grads)
        metrics = {"loss": {"shard": value, "summed": sum_across_learners(value), "vector": per_env}[config.metrics]}
        return train_state._replace(params=params, update_step=train_state.update_step + 1), metrics

    return Agent(init, init_actor_state, act, act_greedy, update)


def test_check_agent_holds_on_an_agent_of_its_own_with_per_shard_metrics():
    """The layout averages the shard's loss (`learner_metrics`): nothing for the agent to do."""
    report = check_agent(LinearConfig(), "MatchCue-v0")
    assert report.passed == tuple(RULES) and report.skipped == () and report.notes == ()


BROKEN = {  # field=value: (rule, words of its sentence)
    "grads=summed": ("learner shards", ["2.00 times as far", "podrl.core.parallel.learner_value_and_grad",
                                        "returns their sum over the shards", "--skip-agent-check"]),
    "grads=local": ("learner shards", ["a train state that differs between learner shards",
                                       "podrl.core.parallel.learner_value_and_grad"]),
    "metrics=summed": ("learner shards", ["metric 'loss'", "do not sum it over the shards"]),
    "metrics=vector": ("metrics", ["metric 'loss' is float32[4]", "shape []"]),
    "action=column": ("act", ["int32[4, 1]", "shape [4] ([B, *action_spec.shape])"]),
    "actor_state=counter": ("actor state", ["leaf['t'] has shape ()", "never reset", "batch axis first"]),
    "actor_state=mixed": ("actor-state reset", ["did not give that row a fresh actor's output", "must not mix"]),
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_check_agent_names_the_rule_a_broken_agent_breaks_and_the_fix(broken):
    field, _, value = broken.partition("=")
    rule, words = BROKEN[broken]
    with pytest.raises(AgentCheckError) as info:
        check_agent(LinearConfig(**{field: value}), "MatchCue-v0", num_envs=4)
    assert info.value.rule == rule and str(info.value).startswith(f"{rule}: ")
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# ---------------------------------------------------------------- the front door


@pytest.mark.timeout(300)
def test_the_layouts_check_a_users_agent_before_a_run_on_several_learner_shards(tmp_path):
    """Summed gradients stop `train_anakin` / `train_sebulba` before a run folder exists, naming
    learner_value_and_grad; `skip_agent_check` runs anyway; the averaged agent trains on 2 shards."""
    logging = LoggingConfig(run_dir=str(tmp_path), console=False)
    anakin = AnakinConfig(env="MatchCue-v0", num_envs=4, rollout_length=4, total_steps=64, updates_per_call=4,
                          num_devices=2, eval_episodes=0, logging=logging)
    with pytest.raises(AgentCheckError, match="learner_value_and_grad"):
        train_anakin(anakin, LinearConfig(grads="summed"))
    sebulba = SebulbaConfig(env="jax:MatchCue-v0", envs_per_thread=4, rollout_length=4, total_steps=32,
                            actor_devices=(0,), learner_devices=(1, 2), eval_episodes=0, logging=logging)
    with pytest.raises(AgentCheckError, match="learner_value_and_grad"):
        train_sebulba(sebulba, LinearConfig(grads="summed"))
    assert not list(tmp_path.iterdir())  # refused before any run folder
    skipped = train_anakin(dataclasses.replace(anakin, skip_agent_check=True), LinearConfig(grads="summed"))
    averaged = train_anakin(anakin, LinearConfig())
    assert skipped.history[-1]["updates"] == averaged.history[-1]["updates"] == 4
    skipped = train_sebulba(dataclasses.replace(sebulba, skip_agent_check=True), LinearConfig(grads="summed"))
    assert skipped.history[-1]["updates"] == 2
    assert np.isfinite(averaged.history[-1]["train/loss"]).all()


def test_only_agents_outside_podrl_are_checked_before_a_run():
    @dataclasses.dataclass(frozen=True)
    class MyPPO(PPOConfig):
        """A user's subclass of podrl's PPO: the user's own code."""

    assert is_builtin(PPOConfig()) and not is_builtin(LinearConfig()) and not is_builtin(MyPPO())


# ---------------------------------------------------------------- check_env


@pytest.mark.parametrize("name", ["CartPole-v1", "MatchCue-v0", "Pendulum-v1"])
def test_check_env_holds_on_podrls_jax_envs(name):
    check_env(name)


class ShortObservations:
    """MatchCue whose observations lose their last entry: they no longer fit the spec."""

    def __init__(self):
        self.env = make("MatchCue-v0")
        self.observation_spec, self.action_spec = self.env.observation_spec, self.env.action_spec

    def reset(self, key):
        state, ts = self.env.reset(key)
        return state, ts._replace(observation=ts.observation[:-1])

    def step(self, state, action):
        state, ts = self.env.step(state, action)
        return state, ts._replace(observation=ts.observation[:-1])


def test_check_env_names_the_method_and_field_a_broken_env_breaks():
    with pytest.raises(EnvSpecMismatchError) as info:
        check_env(ShortObservations())
    assert str(info.value).startswith("ShortObservations.reset(): observation shape: expected")
