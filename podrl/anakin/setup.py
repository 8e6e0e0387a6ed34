"""What an Anakin run builds before it starts (the twin of `podrl.sebulba.setup`): the devices
checked against the config and the agent, the JAX env, the agent, the train state's fit on a
device, a population's starting hyperparameters, and the compiled pieces (`AnakinCompiled`: its
functions jitted here, traced and compiled later by the program, under the watchdog).

Both layouts build their env and agent here, in `build`, before `podrl.run.context.RunContext`
opens the run, and hand the result to their program (`program.py`), because:

* a bad env name, an agent that cannot act in the env, a batch the devices cannot split or a
  replay buffer no device holds then fails before a run folder, a logger or a W&B run exists,
  and before a resume opens its checkpoint;
* building runs in the calling thread, outside the watchdog (`podrl.run.watchdog`, which guards
  the program's device stages: init, compile, the calls): an env constructor takes as long as
  it needs, and no helper thread is left parked in it;
* what holds threads or processes is closed on every failure path (Sebulba's host envs: by its
  `build` when a later step fails, by the program's `close` after it). A JAX env holds neither,
  so nothing here needs closing, and `AnakinProgram.close` has nothing to do.
"""

from __future__ import annotations

from typing import NamedTuple

import jax

from podrl.anakin.compiled import AnakinCompiled
from podrl.anakin.config import AnakinConfig
from podrl.core.learner_state import check_shard_state_fits
from podrl.core.mesh import mesh_devices, population_mesh
from podrl.core.population import member_values, sweepable
from podrl.core.types import AgentConfig
from podrl.envs.registry import make
from podrl.envs.types import JaxEnv, env_spec
from podrl.testing.shards import check_before_run


class AnakinSetup(NamedTuple):
    """What `build` returns: what the program runs, built and checked."""

    compiled: AnakinCompiled  # the jitted init, train call and evaluation (not yet compiled)
    bounds: dict[str, tuple[float, float]]  # the swept hyperparameters' bounds, for PBT's explore step


def build(config: AnakinConfig, agent_config: AgentConfig, env: JaxEnv | None = None,
          devices: list[jax.Device] | None = None) -> AnakinSetup:
    """Checks `config` against the devices and `agent_config`, builds the env (`config.env`, or `env`), the
    agent and the compiled pieces (module doc); `devices` default to `config.num_devices` local ones."""
    devices = devices if devices is not None else mesh_devices(config.num_devices)
    config.check_layout(len(devices), agent_config)
    env = env if env is not None else make(config.env)
    spec = env_spec(env)
    agent = agent_config.make_agent(spec, config.num_updates)
    copies = config.members // config.population_shards  # members per device row
    check_shard_state_fits(agent, spec, agent_config, devices, copies=copies)  # before any allocation
    check_before_run(agent_config, agent, spec, config.rollout_length, len(devices) // config.population_shards,
                     config.skip_agent_check, devices)  # a user's agent on several learner shards
    hyperparams = member_values(config.sweep_axes, config.members, config.seed)
    compiled = AnakinCompiled(agent, env, config, population_mesh(devices, config.population_shards), spec,
                              hyperparams)
    return AnakinSetup(compiled, sweepable(agent_config))
