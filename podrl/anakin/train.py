"""Anakin training: validate, build the compiled program, and let `podrl.run.driver` run it.

Stops cleanly (checkpoint first) on SIGINT/SIGTERM or after
`checkpoint.stop_after_updates`; resumes exactly from `checkpoint.resume`
(every update is a pure function of the state and its index, so N updates, a
stop, a resume and M more equal N + M uninterrupted updates bit for bit).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from podrl.anakin.compiled import AnakinCompiled, AnakinState
from podrl.anakin.config import AnakinConfig
from podrl.anakin.program import AnakinProgram
from podrl.core.learner_state import check_shard_state_fits
from podrl.core.population import member_values, sweepable
from podrl.core.types import AgentConfig
from podrl.envs.types import JaxEnv
from podrl.run.context import RunContext
from podrl.run.driver import drive


class AnakinResult(NamedTuple):
    state: AnakinState
    history: list[dict[str, Any]]  # one record per call
    final_eval_return: np.ndarray | None  # [S] mean greedy return after the last call
    compile_seconds: float
    steps_per_second: float  # env steps per second over all seeds, training calls only
    run_dir: str | None
    checkpoint_dir: str | None = None
    stopped_by: str | None = None  # "SIGTERM", "SIGINT", "stop_after_updates", or None (ran to the end)


def train_anakin(config: AnakinConfig, agent_config: AgentConfig, env: JaxEnv | None = None,
                 devices: list[jax.Device] | None = None, full_config: Any = None) -> AnakinResult:
    """Trains `agent_config`'s agent on `config.env` (or `env`) with the Anakin layout.

    Validates everything before compiling, compiles the train call once (AOT),
    then loops: one call = `updates_per_call` updates, one log record.
    """
    from podrl.envs.registry import make
    from podrl.envs.types import env_spec as spec_of
    from podrl.core.mesh import mesh_devices, population_mesh

    devices = devices if devices is not None else mesh_devices(config.num_devices)
    config.check_layout(len(devices), agent_config)
    env = env if env is not None else make(config.env)
    spec = spec_of(env)
    agent = agent_config.make_agent(spec, config.num_updates)
    copies = config.members // config.population_shards  # members per device row
    check_shard_state_fits(agent, spec, agent_config, devices, copies=copies)  # before any allocation
    hyperparams = member_values(config.sweep_axes, config.members, config.seed)
    compiled = AnakinCompiled(agent, env, config, population_mesh(devices, config.population_shards), spec,
                              hyperparams)
    with RunContext(config, agent_config, full_config) as run:
        driven = drive(AnakinProgram(compiled, config, sweepable(agent_config)), run)
    return AnakinResult(driven.state, driven.history, driven.eval_return, driven.compile_seconds,
                        driven.steps_per_second, run.logger.run_dir, run.checkpoints.directory, driven.stopped_by)
