"""Presets (`podrl.cli.presets`, `--preset NAME`) and the reproduction report (`podrl reproduce`).

Every preset must build valid configs for its layout's command (so a preset naming a field
or env that does not exist fails here, not on a user's machine); flags override a preset's
fields; a preset for the other layout, an unknown one, or one given with `--resume` is a
one-line error. The reproduction command's report is checked against the run's own metrics.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from podrl.cli import presets
from podrl.cli.experiment import preset_experiment
from podrl.cli.train import run_cli
from podrl.reports import reproduce

ROOT = Path(__file__).resolve().parents[2]
REPRODUCE = [sys.executable, "-m", "podrl", "reproduce"]


def parse(layout: str, *argv: str):
    """The args the training command would train with (nothing is trained)."""
    seen = []
    assert run_cli(layout, seen.append, list(argv)) == 0
    return seen[0]


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_every_preset_builds_valid_configs_for_its_layout(name):
    preset = presets.PRESETS[name]
    args = preset_experiment(preset.layout, preset.name)
    for field, value in preset.run.items():
        assert getattr(args.run, field) == (tuple(value) if isinstance(value, list) else value), field
    for field, value in preset.agent_fields.items():
        assert getattr(args.agent, field) == value, field
    assert preset.source and preset.summary
    for env, anchor in preset.anchors.items():
        assert isinstance(anchor.value, float) and anchor.source, env


def test_flags_override_a_preset_and_the_rest_keeps_its_values():
    args = parse("anakin", "--preset", "minatar-ppo", "--num-envs", "32", "--agent.learning-rate", "1e-3")
    preset = presets.PRESETS["minatar-ppo"]
    assert args.preset == "minatar-ppo"
    assert (args.run.num_envs, args.agent.learning_rate) == (32, 1e-3)
    assert args.run.env == preset.run["env"] and args.run.rollout_length == preset.run["rollout_length"]
    assert args.agent.hidden_sizes == (256, 256) and args.agent.gamma == 0.999
    assert parse("anakin").agent.hidden_sizes == (64, 64)  # no preset: the defaults


def test_an_impala_preset_selects_impala_and_takes_impala_only_flags():
    args = parse("anakin", "--preset", "minatar-impala", "--agent.vtrace-lambda", "0.9")
    assert type(args.agent).__name__ == "ImpalaConfig" and args.agent.vtrace_lambda == 0.9
    assert args.agent.optimizer == "rmsprop"
    # RMSProp eps 0.01 and grad clip 40 are the paper's and Cleanba's for losses summed over the batch
    # (a mean left minatar-impala's Breakout greedy return at 0.3 after 327k steps; summed: 3.0)
    assert args.agent.loss_reduction == "sum"
    assert parse("sebulba", "--preset", "atari-impala").agent.loss_reduction == "sum"
    assert args.agent.rmsprop_eps_in_sqrt is False  # Cleanba's PyTorch-style RMSProp
    assert parse("sebulba", "--preset", "atari-impala").agent.rmsprop_eps_in_sqrt is False


def test_presets_are_listed_by_help():
    done = subprocess.run([sys.executable, "scripts/train_anakin.py", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0
    for name, preset in presets.PRESETS.items():
        assert name in done.stdout
        if preset.layout == "anakin":
            assert preset.summary[:40] in " ".join(done.stdout.split())


@pytest.mark.parametrize("argv, fragment", [
    (["scripts/train_anakin.py", "--preset", "atari-ppo"], "run it with `podrl sebulba` (scripts/train_sebulba.py)"),
    (["scripts/train_anakin.py", "--preset", "cartpole-ppo", "--resume", "runs/nowhere"], "preset: a resumed run"),
])
def test_a_wrong_preset_is_a_one_line_error(argv, fragment):
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "error: invalid config: preset: " in done.stderr and fragment in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_preset_names_the_known_ones():
    done = subprocess.run([sys.executable, "scripts/train_anakin.py", "--preset", "pong-dqn"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "cartpole-ppo" in done.stderr + done.stdout


def test_reproduce_writes_a_report_that_matches_the_run(tmp_path):
    out = tmp_path / "report"
    done = subprocess.run(
        [*REPRODUCE, "cartpole-ppo", "--seeds", "2", "--total-steps", "8192",
         "--out", str(out), "--runs-dir", str(tmp_path / "runs"), "--",
         "--updates-per-call", "4", "--eval-every", "1", "--eval-episodes", "4", "--num-devices", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    saved = json.loads((out / "results.json").read_text())
    assert saved["argv"][0] == "cartpole-ppo" and "CPU threads" in saved["machine"]
    results = saved["envs"]
    assert [r["env"] for r in results] == ["CartPole-v1"] and results[0]["seeds"] == 2
    records = [json.loads(line) for line in (out / "CartPole-v1.metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == results[0]["steps"] == 8192
    # the final return is the mean over the last 10% of records, per seed
    assert results[0]["final_return"] == pytest.approx(records[-1]["episode_return_per_seed"])
    assert results[0]["eval_return"] == pytest.approx(records[-1]["eval_return_per_seed"])
    text = (out / "README.md").read_text()
    assert "| CartPole-v1 | 2 | 8,192 |" in text and "| 500 |" in text and "--preset cartpole-ppo" in text
    assert "CPU threads" in text and (out / "CartPole-v1.png").stat().st_size > 5000

    # A run that ended before its own greedy eval (`--stop-after-s`): `--report-only` rebuilds the
    # report from the folder and takes that seed's eval from `podrl evaluate` on its checkpoint.
    saved["envs"][0]["eval_return"][1] = math.nan
    (out / "results.json").write_text(json.dumps(saved))
    (out / "README.md").unlink()
    (out / "CartPole-v1.png").unlink()
    again = subprocess.run([*REPRODUCE, "cartpole-ppo", "--out", str(out),
                            "--report-only", "--eval-episodes", "3"], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    rebuilt = json.loads((out / "results.json").read_text())["envs"][0]
    assert rebuilt["eval_return"][0] == results[0]["eval_return"][0]  # seed 0 had its own: kept, not re-run
    assert 1.0 <= rebuilt["eval_return"][1] <= 500.0  # CartPole: 1 per step
    evaluate = [c for c in rebuilt["commands"] if c.startswith("podrl evaluate ")]
    assert len(evaluate) == 1 and "--episodes 3" in evaluate[0] and "--seed-index 1" in evaluate[0]
    text = (out / "README.md").read_text()
    assert "rebuilt from its results by `--report-only`" in text and evaluate[0] in text
    assert "| CartPole-v1 | 2 | 8,192 |" in text and "--preset cartpole-ppo" in text
    assert (out / "CartPole-v1.png").stat().st_size > 5000
    wrong = subprocess.run([*REPRODUCE, "minatar-ppo", "--out", str(out),
                            "--report-only"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert wrong.returncode != 0 and "not by preset minatar-ppo" in wrong.stderr

    # `--continue`: the runs resume from their checkpoints (8,192 steps) to a larger total, and the
    # report covers the whole runs; the stale evaluation of the earlier checkpoint is dropped.
    more = subprocess.run([*REPRODUCE, "cartpole-ppo", "--out", str(out), "--continue",
                           "--total-steps", "12288"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert more.returncode == 0, more.stdout[-2000:] + more.stderr[-2000:]
    continued = json.loads((out / "results.json").read_text())
    (row,) = continued["envs"]
    assert row["steps"] == 12288 and row["wall_s"] > results[0]["wall_s"]
    assert continued["continued"][0]["argv"][:4] == ["cartpole-ppo", "--out", str(out), "--continue"]
    assert [c for c in row["commands"] if "--resume" in c] and not [c for c in row["commands"] if "evaluate" in c]
    steps = [json.loads(line)["step"] for line in (out / "CartPole-v1.metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 12288 and 8192 in steps  # one run, continued
    assert row["eval_return"] == pytest.approx(json.loads(
        (out / "CartPole-v1.metrics.jsonl").read_text().splitlines()[-1])["eval_return_per_seed"])
    text = (out / "README.md").read_text()
    assert "| CartPole-v1 | 2 | 12,288 |" in text and "continued from its checkpoints by" in text
    assert "Continued to a new total (`--total-steps 12288`)" in text


def test_merging_one_seed_runs_keeps_each_seed():
    runs = [[{"step": 10, "sps": 2.0, "episode_return": 1.0}, {"step": 20, "sps": 4.0, "episode_return": 3.0}],
            [{"step": 10, "sps": 4.0, "episode_return": 5.0}]]
    merged = reproduce.merge_seed_runs(runs)
    assert len(merged) == 1 and merged[0]["episode_return_per_seed"] == [1.0, 5.0]
    assert merged[0]["episode_return"] == 3.0 and merged[0]["sps"] == 3.0
    assert math.isnan(merged[0]["eval_return"])


def test_final_return_skips_records_where_no_episode_ended():
    """Freeway-MinAtar's 2,500-step episodes: the run's last, partial call ends none, and its
    record logs no return; the final return is over the records that have one."""
    records = [{"step": s, "sps": 1.0, "episode_return_per_seed": [float(s), float(s) + 1]} for s in range(1, 20)]
    records.append({"step": 20, "sps": 1.0, "episode_return_per_seed": [None, None], "eval_return_per_seed": [7, 8]})
    records[-2]["episode_return_per_seed"] = [None, 4.0]  # one seed ended no episode in that call
    result = reproduce.summarize("E", records, 2, 1.0, [])
    assert result.final_return == [18.0, 4.0]  # the last 10% of the 19 records with a return: only the 19th
    assert result.eval_return == [7.0, 8.0]


COMMANDS = {
    "podrl": ["podrl sebulba --preset atari-impala --total-steps 5000000 --seed 0",
              "podrl sebulba --resume runs/x --total-steps 8000000", "podrl evaluate runs/x --total-steps 1"],
    "scripts": ["python scripts/train_sebulba.py --preset atari-impala --total-steps 5000000 --seed 0",
                "python scripts/train_sebulba.py --resume runs/x --total-steps 8000000",
                "python scripts/evaluate.py runs/x --total-steps 1"],  # an older report's commands
}


@pytest.mark.parametrize("form", sorted(COMMANDS))
@pytest.mark.parametrize("steps, said", [
    (8_000_000, "every run reached the total its command asked for"),
    (6_000_000, "the budget cut short the runs of ale:Pong"),
])
def test_report_says_whether_the_wall_clock_budget_cut_a_run_short(steps, said, form):
    """A run that reached its `--total-steps` inside its `--stop-after-s` was not cut short; the
    asked total is the last training command's (a continuation's), not the first's, the evaluation's
    or the preset's."""
    commands = COMMANDS[form]
    result = reproduce.EnvResult("ale:Pong", 1, steps, [1.0], [2.0], 60.0, 900.0, commands)
    invocation = {"argv": ["atari-impala"], "date": "2026-12-02", "machine": "m", "stop_after_s": 9000.0}
    text = reproduce.report(presets.get("atari-impala"), [result], invocation)
    assert said in text and "`--stop-after-s`: 9000 s" in text


def test_agent_flags_without_a_subcommand_select_the_preset_agent():
    from podrl.cli.flags import order_argv as with_agent_subcommand

    argv = ["--preset", "x", "--agent.hidden-sizes", "8", "8", "--num-envs", "8", "--agent.gamma", "0.9"]
    assert with_agent_subcommand(argv, "impala") == [
        "--preset", "x", "--num-envs", "8", "agent:impala", "--agent.hidden-sizes", "8", "8", "--agent.gamma", "0.9"]
    given = ["agent:ppo", "--agent.gamma", "0.9"]
    assert with_agent_subcommand(given, "impala") == given
    assert with_agent_subcommand(["--num-envs", "8"], "impala") == ["--num-envs", "8"]
    args = parse("anakin", "--agent.gamma", "0.9", "--num-envs", "8")
    assert type(args.agent).__name__ == "PPOConfig" and args.agent.gamma == 0.9 and args.run.num_envs == 8


def test_brax_ppo_moves_brax_notebooks_batch_into_one_rollout():
    """brax's inverted_pendulum PPO collects batch 1024 x 32 minibatches of 5-step unrolls per update,
    with 2048 envs: the preset's 2048 envs x 80 steps are the same 163,840 steps, split into 32
    minibatches of 5,120, with observations normalised and brax's reward scaling of 10."""
    preset = presets.PRESETS["brax-ppo"]
    run, agent = preset.run, preset.agent_fields
    assert run["num_envs"] == 2048 and run["num_envs"] * run["rollout_length"] == 1024 * 32 * 5
    assert agent["num_minibatches"] == 32 and agent["num_epochs"] == 4
    assert agent["normalize_observations"] is True and agent["reward_scale"] == 10.0 and agent["gamma"] == 0.97
    assert run["env"] in preset.anchors and preset.layout == "anakin"
