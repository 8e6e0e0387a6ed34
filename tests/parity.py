"""What the parity tests of both layouts share: a tiny Sebulba config, the Anakin and Sebulba states or params
of one agent after the same updates, their leaves' largest differences, the live Sebulba threads."""

from __future__ import annotations

import threading

import jax
import numpy as np

import podrl.envs
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.envs.registry import make
from podrl.run.config import LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba

QUIET = LoggingConfig(run_dir=None, console=False)


def sebulba_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sebulba-actor")]


def tiny(**overrides) -> SebulbaConfig:
    base = dict(env="jax:MatchSign-v0", envs_per_thread=4, rollout_length=8, total_steps=4 * 8 * 6,
                actor_devices=(0,), learner_devices=(1, 2), log_every=2, timeout_s=20.0, logging=QUIET)
    base.update(overrides)
    if "total_steps" not in overrides:
        threads = len(base["actor_devices"]) * base.get("threads_per_actor_device", 1)
        base["total_steps"] = threads * base["envs_per_thread"] * base["rollout_length"] * 6
    return SebulbaConfig(**base)


def anakin_sebulba_states(agent_config, T: int = 16, B: int = 8, U: int = 5, env: str = "CartPole-v1"):
    """`(anakin, sebulba)` train states after `U` updates of `agent_config` on `env` in both
    layouts with the same seed: Anakin on one device (its seed axis dropped), Sebulba with
    lag=0, one actor thread, the JAX env through the host adapter and one learner device.
    Sebulba skips its final evaluation (a host loop; the states are compared)."""
    anakin = train_anakin(AnakinConfig(env=env, num_envs=B, rollout_length=T, total_steps=T * B * U,
                                       num_devices=1, updates_per_call=U, eval_every=0, logging=QUIET),
                          agent_config)
    sebulba = train_sebulba(SebulbaConfig(env=f"jax:{env}", envs_per_thread=B, rollout_length=T,
                                          total_steps=T * B * U, actor_devices=(0,), learner_devices=(1,),
                                          lag="0", eval_episodes=0, logging=QUIET), agent_config)
    assert int(np.asarray(sebulba.train_state.update_step)) == U
    return jax.tree.map(lambda a: np.asarray(a)[0], anakin.state.train_state), jax.device_get(sebulba.train_state)


def anakin_sebulba_params(agent_config, T: int = 16, B: int = 8, U: int = 5, env: str = "CartPole-v1"):
    """`(anakin, sebulba, init)` parameter leaves of `anakin_sebulba_states`; `init` is the
    params both started from."""
    anakin, sebulba = anakin_sebulba_states(agent_config, T, B, U, env)
    spec = podrl.envs.env_spec(make(env))
    init = agent_config.make_agent(spec, U).init(jax.random.split(jax.random.key(0), 3)[0], spec)
    return [np.asarray(a) for a in jax.tree.leaves(anakin.params)], \
        [np.asarray(s) for s in jax.tree.leaves(sebulba.params)], [np.asarray(i) for i in jax.tree.leaves(init.params)]


def max_diffs(a_leaves, b_leaves) -> list[float]:
    return [float(np.max(np.abs(a - b))) for a, b in zip(a_leaves, b_leaves, strict=True)]
