"""Run options declared once with their field (`podrl.run.options`): the resume policy the checkpoint
check applies, the `--help` boxes the CLI draws, a layout's own wording, and what a redeclared field keeps."""

from __future__ import annotations

import dataclasses

import pytest

from podrl.agents.ppo import PPOConfig
from podrl.anakin.config import AnakinConfig
from podrl.cli.experiment import Experiment
from podrl.cli.flags import BOXES, nested_configs, run_boxes
from podrl.core.errors import ConfigError
from podrl.envs.schemes import help_text
from podrl.run.config import CheckpointConfig, LoggingConfig, RunConfig
from podrl.run.config_json import resolved_config
from podrl.run.options import MAY_CHANGE, MUST_MATCH, help_of, may_change_on_resume, option, option_of
from podrl.run.resume import check_resumable, config_differences
from podrl.sebulba import SebulbaConfig

SHARED = {"total_steps", "eval_every", "eval_episodes", "eval_max_steps", "eval_async", "stop_at_return",
          "compile_cache", "skip_agent_check", "logging", "checkpoint", "timeout_s"}


def test_each_layout_declares_which_fields_may_change_on_resume():
    assert may_change_on_resume(AnakinConfig) == SHARED | {"updates_per_call", "num_devices"}
    assert may_change_on_resume(SebulbaConfig) == SHARED | {"log_every", "learner_devices", "actor_cpus"}
    assert option_of(SebulbaConfig, "eval_every").on_resume == MAY_CHANGE  # redeclared: keeps RunConfig's option
    assert option_of(AnakinConfig, "num_envs") == option_of(AnakinConfig, "no_such_field")  # the defaults
    assert option_of(AnakinConfig, "num_envs").on_resume == MUST_MATCH


def test_the_resume_check_lets_exactly_the_declared_fields_differ():
    saved = resolved_config("anakin", AnakinConfig(), PPOConfig())
    changed = dataclasses.replace(AnakinConfig(), total_steps=1_000_000, updates_per_call=8, timeout_s=0.0,
                                  logging=LoggingConfig(run_dir=None), checkpoint=CheckpointConfig(keep=9))
    current = resolved_config("anakin", changed, PPOConfig())
    may_change = may_change_on_resume(AnakinConfig)
    assert config_differences(saved, current, may_change=may_change) == []
    assert len(config_differences(saved, current)) == 5  # nothing may change unless declared
    other = resolved_config("anakin", dataclasses.replace(changed, num_envs=8, seed=1), PPOConfig())
    with pytest.raises(ConfigError) as info:
        check_resumable(saved, other, may_change=may_change)
    assert "run.num_envs (checkpoint: 4, now: 8); run.seed (checkpoint: 0, now: 1)" in str(info.value)
    assert f"Only {sorted(may_change)} may change on resume." in str(info.value)


def test_the_boxes_come_from_the_fields():
    anakin, sebulba = run_boxes(AnakinConfig), run_boxes(SebulbaConfig)
    assert tuple(anakin) == BOXES == ("run", "env", "evaluation", "population")
    assert anakin["env"] == ("env",) and sebulba["env"] == ("env", "env_kwargs", "vectorization")
    assert anakin["evaluation"] == sebulba["evaluation"] == ("eval_every", "eval_episodes", "eval_max_steps",
                                                             "eval_async", "stop_at_return")
    assert anakin["population"] == ("population", "sweep", "population_shards", "pbt_every", "pbt_fraction",
                                    "pbt_perturb") and sebulba["population"] == ()
    assert anakin["run"][:3] == ("seed", "total_steps", "compile_cache") and "log_every" in sebulba["run"]
    assert nested_configs(AnakinConfig) == nested_configs(SebulbaConfig) == {"logging": LoggingConfig,
                                                                             "checkpoint": CheckpointConfig}


def test_a_layouts_wording_replaces_the_docstring_only_for_that_layout():
    assert help_of(RunConfig, "env", "anakin", "doc") == help_text("anakin")
    assert help_of(SebulbaConfig, "env", "sebulba", "doc") == help_text("sebulba")
    assert "--updates-per-call" in help_of(RunConfig, "eval_every", "anakin", "doc")
    assert help_of(SebulbaConfig, "eval_every", "sebulba", "doc") == "doc"  # Sebulba's own docstring
    assert "--log-every" in help_of(LoggingConfig, "console", "sebulba", "doc")
    assert "--actor-devices" in help_of(Experiment, "cpu_devices", "sebulba", None)
    assert help_of(AnakinConfig, "num_envs", "anakin", "doc") == "doc"


def test_an_option_is_a_plain_dataclass_field():
    @dataclasses.dataclass(frozen=True)
    class Config:
        x: int = option(3, box="env", on_resume=MAY_CHANGE, help={"anakin": "x of Anakin"})
        y: tuple = option(default_factory=tuple)

    assert Config() == Config(3, ()) and option_of(Config, "x").help == {"anakin": "x of Anakin"}
    assert option_of(Config, "y").box == "run"
    with pytest.raises(ValueError, match="on_resume"):
        option(1, on_resume="sometimes")
