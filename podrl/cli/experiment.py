"""An experiment resolved once: defaults <- preset <- checkpoint (on resume) <- flags.

An `Experiment` is what a training run is given: the layout's run config, the agent
config, the multi-process settings, the preset it started from and the CPU device
split. The run config's string fields are parsed when it is built (its `__post_init__`): a
malformed one is a `ConfigError` naming the field before anything compiles (the env name is the
layout's to resolve, through `podrl.envs.schemes`).

    experiment = podrl.cli.flags.resolve("anakin", ["--preset", "minatar-ppo", "--num-envs", "32"])
    experiment.run.num_envs, experiment.agent.learning_rate   # 32, the preset's 5e-4

The layers, each overriding the one before:
  1. the configs' defaults;
  2. `--preset NAME` (`podrl.cli.presets`): its run and agent fields;
  3. `--resume PATH`: every run and agent field of the checkpoint's saved config
     (a preset is refused there: the checkpoint's config is the run's);
  4. the flags given (`podrl.cli.flags` groups them and resolves the layers: `resolve`; run
     flags may come before or after `agent:<name>`).
`podrl evaluate` (`podrl.cli.policy`) and `podrl reproduce` read checkpoints and
presets through the same functions (`saved_experiment`, `preset_experiment`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import Any, Mapping

from podrl.cli import presets
from podrl.core.distributed import DistributedConfig
from podrl.core.errors import ConfigError
from podrl.core.types import AgentConfig
from podrl.run.checkpoint_folder import resume_dir
from podrl.run.config import RunConfig
from podrl.run.config_json import config_from_json
from podrl.run.options import option

LAYOUTS = {"anakin": ("podrl.anakin.config", "AnakinConfig"), "sebulba": ("podrl.sebulba.config", "SebulbaConfig")}
"""Each layout's run config, imported when asked for."""


def layout_config(layout: str) -> type[RunConfig]:
    """The run config class of `layout` ("anakin" or "sebulba")."""
    if layout not in LAYOUTS:
        raise ConfigError("layout", f"must be one of {sorted(LAYOUTS)}, got {layout!r}")
    module, name = LAYOUTS[layout]
    return getattr(importlib.import_module(module), name)


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One training run, resolved (see the module doc); what the training commands train and save."""

    run: RunConfig
    """The layout's run config (`AnakinConfig` or `SebulbaConfig`)."""
    agent: AgentConfig
    """The agent and its hyperparameters."""
    distributed: DistributedConfig = dataclasses.field(default_factory=DistributedConfig)
    """Multi-process (multi-host) settings; defaults run one process."""
    preset: str | None = None
    """The preset the run started from, or None."""
    cpu_devices: int | None = option(None, help={
        "anakin": "On CPU, split the host into this many JAX devices (a fake mesh; same as "
                  "XLA_FLAGS=--xla_force_host_platform_device_count=N).",
        "sebulba": "On CPU, split the host into this many JAX devices (actors on --actor-devices, learners on the "
                   "rest)."})
    """On CPU, split the host into this many JAX devices (a fake mesh)."""

    def __post_init__(self):
        if not isinstance(self.run, RunConfig) or not self.run.layout:
            raise ConfigError("run", f"must be a layout's run config, got {type(self.run).__name__}")
        if self.cpu_devices is not None and (not isinstance(self.cpu_devices, int) or self.cpu_devices < 1):
            raise ConfigError("cpu_devices", f"must be a positive integer, got {self.cpu_devices!r}")

    @property
    def layout(self) -> str:
        return self.run.layout

    @functools.cached_property
    def env_options(self) -> Mapping[str, Any]:
        """Sebulba's `env_kwargs` as the host env factory's keyword arguments ({} for Anakin)."""
        return dict(getattr(self.run, "env_options", {}))


def default_experiment(layout: str) -> Experiment:
    """`layout`'s defaults: its run config and the first registered agent."""
    from podrl.agents import AGENTS

    return Experiment(run=layout_config(layout)(), agent=next(iter(AGENTS.values())).config())


def _replace(config: Any, fields: Mapping[str, Any], prefix: str) -> Any:
    """`config` with `fields` replaced; ConfigError("preset") naming a field the config lacks."""
    names = {f.name for f in dataclasses.fields(config)}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise ConfigError("preset", f"{prefix}{unknown[0]} is not a field of {type(config).__name__}")
    return dataclasses.replace(config, **fields)


def preset_experiment(layout: str, name: str) -> Experiment:
    """The experiment of preset `name` (`podrl.cli.presets`) for `layout`'s training command.

    ConfigError("preset") for an unknown preset or one of the other layout; an invalid
    value is the field's own ConfigError.
    """
    from podrl.agents import AGENTS
    preset = presets.get(name)
    if preset.layout != layout:
        raise ConfigError("preset", f"{preset.name!r} belongs to the {preset.layout} layout; run it with "
                                    f"`podrl {preset.layout}` (scripts/train_{preset.layout}.py)")
    run = _replace(layout_config(layout)(), preset.run, "run.")
    agent = _replace(AGENTS[preset.agent].config(), preset.agent_fields, "agent.")
    return Experiment(run=run, agent=agent, preset=preset.name)


def saved_agent(saved: Mapping[str, Any], where: str) -> tuple[AgentConfig, list[str]]:
    """`(agent config, ignored)`: the agent of a checkpoint's saved config, rebuilt from the class and
    module it names (`podrl.agents.config_from_saved`: a user's own agent as podrl's; for a resume and
    for `podrl.cli.policy` alike), and the saved fields this version of podrl's own agent does not know,
    left out (a resume's check then names them). ConfigError("agent") naming `where` for an agent
    this process cannot rebuild; an invalid saved value is that field's ConfigError."""
    from podrl.agents import config_from_saved

    return config_from_saved(saved.get("agent_type"), saved["agent"], saved.get("agent_module"), repr(where))


def saved_experiment(saved: Mapping[str, Any], where: str, layout: str | None = None) -> Experiment:
    """The experiment a checkpoint's saved config describes (`podrl.run.config_json.resolved_config`).

    With `layout`, ConfigError("resume") when the checkpoint is of the other layout.
    """
    if layout is not None and saved.get("layout") != layout:
        raise ConfigError("resume", f"{where} holds a {saved.get('layout')!r} checkpoint; this command trains "
                                    f"with the {layout!r} layout")
    run = config_from_json(layout_config(saved.get("layout")), saved["run"], "run.")
    return Experiment(run=run, agent=saved_agent(saved, where)[0])


def read_saved_config(path: str) -> dict[str, Any]:
    """The saved config of the latest checkpoint at `path` (a run or checkpoint folder)."""
    from podrl.run.checkpoint import Checkpointer  # orbax: only when a checkpoint is read

    source = Checkpointer(resume_dir(path), read_only=True)
    try:
        return source.read_config()
    finally:
        source.close()


def resume_experiment(layout: str, path: str) -> Experiment:
    """The defaults of a run resuming from `path`: every field of its checkpoint, `resume=path`."""
    saved = saved_experiment(read_saved_config(path), path, layout)
    run = saved.run
    run = dataclasses.replace(run, checkpoint=dataclasses.replace(run.checkpoint, resume=path))
    return dataclasses.replace(saved, run=run)


def agent_name(agent: AgentConfig) -> str:
    """`agent`'s name on the command line (`agent:<name>`): a registered name, or its `module:Class`."""
    from podrl.agents import agent_name as registered_name

    return registered_name(agent)
