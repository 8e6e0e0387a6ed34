"""The greedy return of the policy a run starts from, for learning tests.

A learning test asserts both ends: the untrained policy scores far below the
threshold (so the task can't be passed by chance) and the trained one reaches it.
"""

from __future__ import annotations

import jax
import numpy as np

import podrl.envs
from podrl.anakin import AnakinCompiled
from podrl.anakin.config import AnakinConfig
from podrl.core.mesh import data_mesh
from podrl.envs.adapters.make import make_host_env
from podrl.envs.types import EnvSpec
from podrl.run.evaluation import evaluate_host_greedy


def anakin_initial_return(config: AnakinConfig, agent_config, devices: list[jax.Device]) -> np.ndarray:
    """`[S]` mean greedy return of the state `train_anakin(config, agent_config)` starts from,
    measured by the run's own evaluation program."""
    env = podrl.envs.make(config.env)
    spec = podrl.envs.env_spec(env)
    program = AnakinCompiled(agent_config.make_agent(spec, config.num_updates), env, config, data_mesh(devices), spec)
    return program.evaluate(program.init(), config.seed + 1)


def sebulba_initial_params(agent_config, spec: EnvSpec, seed: int):
    """The params a Sebulba run with `seed` starts from: `agent.init(split(key(seed), 3)[0])`
    (the key schedule of podrl/sebulba/program.py; test_fault_matrix.py checks it against
    the step-0 checkpoint of a real run)."""
    agent = agent_config.make_agent(spec, 1)
    return agent, agent.init(jax.random.split(jax.random.key(seed), 3)[0], spec).params


def sebulba_initial_return(agent_config, env_name: str, seed: int = 0, episodes: int = 16,
                           max_steps: int = 1000) -> float:
    """Mean greedy return, over `episodes` host envs, of the params a Sebulba run with `seed` starts from."""
    env = make_host_env(env_name, episodes, seed=seed)
    try:
        agent, params = sebulba_initial_params(agent_config, EnvSpec(env.observation_spec(), env.action_spec()), seed)
        return float(evaluate_host_greedy(agent, params, env, seed=seed, max_steps=max_steps).returns.mean())
    finally:
        env.close()
