"""A researcher's own agent, outside podrl: docs/own-agent.md's A2C (its own config class, per-shard metrics),
written into a temporary folder outside the checkout, runs where podrl's agents run.

From Python in both layouts (on 2 learner shards: the layout averages its metrics, the front door's
learner-shard check passes); through `podrl anakin` / `podrl sebulba` with `agent:<module>:<Class>` and
its `--agent.*` flags; through a 2-process `podrl launch` pod; then `--resume` and `podrl evaluate`
rebuild it from the run folder alone. A module that no longer imports and a field the class lost are
errors naming them; a class of the user's named like one of podrl's never loads as podrl's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from podrl.agents import UnknownAgentError, agent_name, config_from_saved
from podrl.agents.ppo import PPOConfig
from podrl.anakin import AnakinConfig, train_anakin
from podrl.core.errors import ConfigError
from podrl.run.config import LoggingConfig
from podrl.run.config_json import resolved_config
from podrl.sebulba import SebulbaConfig, train_sebulba
from tools import check_readme

ROOT = Path(__file__).resolve().parents[2]
PODRL = [sys.executable, "-m", "podrl"]
TINY_RUN = ["--env", "CartPole-v1", "--num-envs", "4", "--rollout-length", "8", "--eval-episodes", "2"]


def write_agent(folder: Path, module: str, extra: str = "") -> Path:
    """docs/own-agent.md's `my_a2c.py` (as `tools/check_readme.py` extracts it), saved as `<module>.py` in
    `folder`, with `extra` source appended."""
    files, _, _ = check_readme.extract((ROOT / "docs" / "own-agent.md").read_text(), "docs/own-agent.md")
    path = folder / f"{module}.py"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(files["my_a2c.py"] + extra)
    return path


def podrl(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`podrl <args>` run from `cwd` (podrl found as installed, the user's module only through `cwd`)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(PODRL + list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """`(folder, module)`: the A2C in a fresh folder outside the checkout, importable in this process."""
    folder = tmp_path / "user"
    module = f"a2c_{tmp_path.name.replace('-', '_')}"  # a name no other test of this worker imports
    write_agent(folder, module, extra=SAME_NAME)
    monkeypatch.syspath_prepend(str(folder))
    yield folder, module
    sys.modules.pop(module, None)


SAME_NAME = '''

@dataclasses.dataclass(frozen=True)
class PPOConfig(A2CConfig):
    """The user's own agent, named like one of podrl's."""
'''


@pytest.mark.timeout(600)
def test_a_users_agent_trains_from_python_in_both_layouts_on_two_learner_shards(user_module, tmp_path):
    folder, module = user_module
    a2c = __import__(module).A2CConfig(entropy_coef=0.02)
    logging = LoggingConfig(run_dir=str(tmp_path / "runs"), run_name="anakin", console=False)
    result = train_anakin(AnakinConfig(env="CartPole-v1", num_envs=4, rollout_length=8, total_steps=128,
                                       updates_per_call=2, num_devices=2, eval_episodes=2, logging=logging), a2c)
    assert [r["updates"] for r in result.history] == [2, 4]
    assert np.isfinite(result.history[-1]["train/loss"]).all() and f"{result.final_eval_return:.1f}"
    saved = json.loads(Path(result.run_dir, "config.json").read_text())
    assert (saved["agent_type"], saved["agent_module"]) == ("A2CConfig", module)
    assert config_from_saved(saved["agent_type"], saved["agent"], saved["agent_module"]) == (a2c, [])
    host = train_sebulba(SebulbaConfig(env="CartPole-v1", envs_per_thread=4, rollout_length=8, total_steps=64,
                                       actor_devices=(0,), learner_devices=(1, 2), eval_episodes=2,
                                       logging=dataclasses.replace(logging, run_dir=None)), a2c)
    assert len(host.history) == 1 and np.isfinite(host.history[-1]["train/loss"])


def test_a_users_class_named_like_podrls_loads_as_the_users(user_module):
    folder, module = user_module
    mine = __import__(module).PPOConfig(value_coef=0.25)
    saved = resolved_config("anakin", AnakinConfig(), mine)
    assert (saved["agent_type"], saved["agent_module"]) == ("PPOConfig", module)
    rebuilt, ignored = config_from_saved(saved["agent_type"], saved["agent"], saved["agent_module"])
    assert type(rebuilt) is type(mine) and rebuilt == mine and ignored == []
    assert agent_name(mine) == f"{module}:PPOConfig" and agent_name(PPOConfig()) == "ppo"
    # a folder from before the module was recorded names podrl's own PPO, and loads as before
    old, ignored = config_from_saved("PPOConfig", {"clip_eps": 0.3, "gone_field": 1})
    assert type(old) is PPOConfig and old.clip_eps == 0.3 and ignored == ["gone_field"]


def test_a_run_whose_module_or_fields_changed_is_an_error_naming_them(user_module):
    folder, module = user_module
    values = dataclasses.asdict(__import__(module).A2CConfig())
    with pytest.raises(UnknownAgentError) as info:
        config_from_saved("A2CConfig", values, "no_such_module_here", where="'runs/a2c'")
    assert "the agent of 'runs/a2c', no_such_module_here:A2CConfig, cannot be rebuilt: cannot import module " \
           "'no_such_module_here'" in str(info.value) and "PYTHONPATH" in str(info.value)
    with pytest.raises(ConfigError) as info:
        config_from_saved("A2CConfig", {**values, "old_coef": 1.0}, module, where="'runs/a2c'")
    assert info.value.field == "agent.old_coef" and f"module {module!r} changed since the run" in str(info.value)
    with pytest.raises(UnknownAgentError, match="__main__"):
        config_from_saved("A2CConfig", values, "__main__")


@pytest.mark.timeout(900)
def test_the_command_line_trains_resumes_and_evaluates_a_users_agent_from_its_run_folder(tmp_path):
    """`agent:my_a2c:A2CConfig` with its flags, 2 seeds on 2 devices; `--resume` and `podrl evaluate` from the
    run folder; from another folder the module is missing; with a field renamed the resume names it."""
    work = tmp_path / "work"
    write_agent(work, "my_a2c")
    first = podrl("anakin", *TINY_RUN, "--total-steps", "256", "--checkpoint.stop-after-updates", "4",
                  "--num-seeds", "2", "--cpu-devices", "2", "--logging.run-name", "a2c",
                  "agent:my_a2c:A2CConfig", "--agent.entropy-coef", "0.02", cwd=work)
    assert first.returncode == 0, first.stderr[-3000:]
    saved = json.loads((work / "runs" / "a2c" / "config.json").read_text())
    assert (saved["agent_type"], saved["agent_module"], saved["agent"]["entropy_coef"]) == ("A2CConfig", "my_a2c",
                                                                                           0.02)
    rest = podrl("anakin", "--resume", "runs/a2c", "--cpu-devices", "2", cwd=work)
    assert rest.returncode == 0 and "updates 4..8 of 8" in rest.stdout, rest.stdout + rest.stderr[-3000:]
    evaluated = podrl("evaluate", "runs/a2c", "--episodes", "2", "--seed-index", "1", "--json", cwd=work)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert json.loads(evaluated.stdout.splitlines()[-1])["step"] == 8
    elsewhere = podrl("evaluate", str(work / "runs" / "a2c"), "--episodes", "2", cwd=tmp_path)
    assert elsewhere.returncode == 2 and "my_a2c:A2CConfig, cannot be rebuilt: cannot import module 'my_a2c'" \
        in elsewhere.stderr and "Traceback" not in elsewhere.stderr, elsewhere.stderr
    source = work / "my_a2c.py"
    source.write_text(source.read_text().replace("entropy_coef", "entropy_weight"))
    renamed = podrl("anakin", "--resume", "runs/a2c", "--total-steps", "512", "--cpu-devices", "2", cwd=work)
    assert renamed.returncode == 2, renamed.stderr[-3000:]
    assert "error: invalid config: agent.entropy_coef: is saved with 'runs/a2c', but my_a2c:A2CConfig has no such " \
           "field (module 'my_a2c' changed since the run)" in renamed.stderr


@pytest.mark.timeout(900)
def test_a_pod_and_the_sebulba_command_train_a_users_agent(tmp_path):
    """A 2-process `podrl launch` pod (checkpoints in a shared folder), resumed by one process on 2 devices and
    evaluated; `podrl sebulba` with 2 learner devices (the front door checks the agent there too)."""
    write_agent(tmp_path, "my_a2c")
    pod = podrl("launch", "--num-processes", "2", "--devices-per-process", "1", "--", *PODRL, "anakin", *TINY_RUN,
                "--total-steps", "128", "--checkpoint.directory", "ckpt", "--logging.run-dir", "None",
                "agent:my_a2c:A2CConfig", cwd=tmp_path, timeout=400)
    assert pod.returncode == 0, pod.stdout[-4000:]
    assert "[p0]" in pod.stdout and "[p1]" in pod.stdout and "done at update 4" in pod.stdout
    # (a --total-steps below one update of the defaults, 512 steps, is refused before the checkpoint is read)
    resumed = podrl("anakin", "--resume", "ckpt", "--total-steps", "512", "--cpu-devices", "2", cwd=tmp_path)
    assert resumed.returncode == 0 and "updates 4..16 of 16" in resumed.stdout, \
        resumed.stdout + resumed.stderr[-3000:]
    evaluated = podrl("evaluate", "ckpt", "--episodes", "2", "--json", cwd=tmp_path)
    assert evaluated.returncode == 0 and json.loads(evaluated.stdout.splitlines()[-1])["step"] == 16, evaluated.stderr
    host = podrl("sebulba", "--env", "CartPole-v1", "--envs-per-thread", "4", "--rollout-length", "8",
                 "--total-steps", "64", "--eval-episodes", "2", "--cpu-devices", "3", "--learner-devices", "1", "2",
                 "--logging.run-dir", "None", "agent:my_a2c:A2CConfig", "--agent.value-coef", "0.25", cwd=tmp_path)
    assert host.returncode == 0 and "done at update 2" in host.stdout, host.stdout + host.stderr[-3000:]


def test_an_installed_packages_agents_are_named_on_the_command_line_beside_podrls(user_module, monkeypatch, capsys):
    """The `podrl.agents` entry-point group: `agent:<name>` picks the class, its fields are flags, `--help`
    lists it beside podrl's; an entry point that does not load, or takes a built-in's name, is left out
    with a line naming it."""
    import importlib.metadata

    import podrl.agents
    from podrl.cli import flags
    from podrl.cli.flags import resolve

    folder, module = user_module
    points = [importlib.metadata.EntryPoint("a2c", f"{module}:A2CConfig", "podrl.agents"),
              importlib.metadata.EntryPoint("broken", "no_such_module_here:X", "podrl.agents"),
              importlib.metadata.EntryPoint("ppo", f"{module}:PPOConfig", "podrl.agents")]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [p for p in points if p.group == group])
    podrl.agents.installed_agents.cache_clear()
    flags.flags_type.cache_clear()
    try:
        assert list(podrl.agents.installed_agents()) == ["a2c"]
        left_out = capsys.readouterr().err
        assert "leaving out agent 'broken' (no_such_module_here:X" in left_out and "does not load" in left_out
        assert "leaving out agent 'ppo'" in left_out and "takes the name of another agent" in left_out
        experiment = resolve("anakin", ["agent:a2c", "--agent.entropy-coef", "0.3", "--num-envs", "8"])
        assert type(experiment.agent).__module__ == module and experiment.agent.entropy_coef == 0.3
        assert agent_name(experiment.agent) == "a2c" and experiment.run.num_envs == 8
        with pytest.raises(SystemExit):
            resolve("anakin", ["--help"])
        assert "agent:a2c" in capsys.readouterr().out
        # the path form, as --help writes it (a module's underscores as hyphens), and a name nothing has
        hyphens = resolve("anakin", [f"agent:{module.replace('_', '-')}:PPOConfig", "--agent.value-coef", "0.2"])
        assert type(hyphens.agent).__module__ == module and hyphens.agent.value_coef == 0.2
        with pytest.raises(UnknownAgentError, match="no agent is named 'a2cc'.*your own: agent:<module>:<Class>"):
            resolve("anakin", ["agent:a2cc"])
    finally:
        podrl.agents.installed_agents.cache_clear()
        flags.flags_type.cache_clear()
