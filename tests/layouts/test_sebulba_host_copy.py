"""The Sebulba actor's one host copy per env step (`podrl.sebulba.host_copy.ActStep`): the actions and
agent extras it unpacks are, bit for bit, what `agent.act` returns leaf by leaf (test_sebulba_actors.py
checks whole actor trajectories through it)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrl.envs
from podrl.agents.ppo import PPOConfig
from podrl.core.keys import step_keys
from podrl.core.types import Agent, TrainState
from podrl.sebulba.rollout import make_act_step


def mixed_agent() -> Agent:
    """`act` returns leaves of every width and kind, a scalar one and nested containers among them."""

    def act(params, actor_state, observation, key):
        batch = observation.shape[0]
        noise = jax.random.normal(key, (batch, 3))
        extras = {"f32": noise, "f16": noise[:, 0].astype(jnp.float16), "done": noise[:, 1] > 0,
                  "i8": (noise[:, 2] * 50).astype(jnp.int8), "u32": jax.random.bits(key, (batch,)),
                  "pair": (jnp.float32(batch) * params["w"], jnp.arange(batch * 2, dtype=jnp.int16).reshape(batch, 2)),
                  "nan": jnp.full((batch,), jnp.nan) * observation[:, 0]}
        return (observation[:, 0] > 0.5).astype(jnp.int32), extras, actor_state

    return Agent(init=lambda key, spec: TrainState({"w": jnp.float32(2.5)}, (), jnp.zeros((), jnp.int32)),
                 init_actor_state=lambda b, columns=None: (), act=act, act_greedy=None, update=None)


def leafwise(agent: Agent, params, observation, keys, t):
    """What the actor fetched before: `agent.act`'s action and extras, copied to the host leaf by leaf."""
    action, extras, _ = jax.jit(agent.act)(params, (), observation, keys[t])
    return jax.device_get((action, extras))


def assert_bitwise_equal(got, expected) -> None:
    assert jax.tree.structure(got) == jax.tree.structure(expected)
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, y.dtype, x.shape, y.shape)
        np.testing.assert_array_equal(x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8))  # bits, NaNs too


def test_unpacked_leaves_are_the_agents_bits_for_every_dtype_and_batch_size():
    agent = mixed_agent()
    params = agent.init(None, None).params
    act_step = make_act_step(agent)
    keys = step_keys(jax.random.key(3), 4)
    for t in range(4):
        for batch in (5, 8):  # two traces, alternating: each unpacked by its own layout
            observation = np.random.default_rng(batch).uniform(size=(batch, 2)).astype(np.float32)
            packed, actor_state = act_step(params, (), observation, keys, t)
            assert packed.dtype == jnp.uint8 and packed.ndim == 1 and actor_state == ()
            assert_bitwise_equal(act_step.unpack(np.asarray(packed)), leafwise(agent, params, observation, keys, t))
    with pytest.raises(RuntimeError, match="no traced step packs"):
        act_step.unpack(np.zeros(3, np.uint8))


def test_ppo_actions_log_probs_and_values_survive_the_packed_copy():
    env = podrl.envs.make("CartPole-v1")
    spec = podrl.envs.env_spec(env)
    agent = PPOConfig().make_agent(spec, 1)
    params = agent.init(jax.random.key(0), spec).params
    observation = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    act_step, keys = make_act_step(agent), step_keys(jax.random.key(1), 3)
    for t in range(3):
        state = agent.init_actor_state(16)
        packed, _ = act_step(params, state, observation, keys, t)
        action, extras, _ = jax.jit(agent.act)(params, state, observation, keys[t])
        assert_bitwise_equal(act_step.unpack(np.asarray(packed)), jax.device_get((action, extras)))


def test_a_key_in_the_extras_is_refused_with_a_sentence():
    agent = mixed_agent()
    keyed = agent._replace(act=lambda p, s, o, key: (o[:, 0], {"key": key}, s))
    with pytest.raises(TypeError, match="actions and agent extras must be numeric or bool"):
        make_act_step(keyed)(agent.init(None, None).params, (), np.zeros((2, 2), np.float32),
                             step_keys(jax.random.key(0), 1), 0)


INLINE_PROBE = """
import jax, numpy as np
from podrl.sebulba.setup import inline_cpu_dispatch
chose = inline_cpu_dispatch()
value = float(jax.jit(lambda x: (x * 3).sum())(np.arange(4.0, dtype=np.float32)))
print(chose, jax.config.values["jax_cpu_enable_async_dispatch"], value)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("environment, expected", [({}, "True False 18.0"),
                                                   ({"JAX_CPU_ENABLE_ASYNC_DISPATCH": "1"}, "False True 18.0")])
def test_podrl_sebulba_runs_cpu_programs_inline_unless_the_environment_chose(environment, expected):
    """`podrl sebulba` turns XLA:CPU's asynchronous dispatch off before JAX starts (the actor runs its
    inference itself); a user's JAX_CPU_ENABLE_ASYNC_DISPATCH wins. Results are the same either way."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_CPU_ENABLE_ASYNC_DISPATCH"}
    done = subprocess.run([sys.executable, "-c", INLINE_PROBE], env={**env, **environment}, capture_output=True,
                          text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == expected
