"""scripts/check_readme.py: it finds every README command and example file, shortens only step counts,
and runs commands as written (here: the custom-JAX-env commands, which need the extracted file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import check_readme  # noqa: E402


def test_extracts_every_command_and_example_file():
    files, commands, skipped = check_readme.extract((ROOT / "README.md").read_text())
    assert {"my_pkg/walk.py", "my_envs.py", "my_dm_envs.py"} <= set(files)
    assert "class Walk" in files["my_pkg/walk.py"]
    texts = [c.text for c in commands]
    for script in ("train_anakin.py", "train_sebulba.py", "launch_local.py", "evaluate.py", "plot.py",
                   "bench_anakin.py"):
        assert any(script in t for t in texts), script
    assert any(t.endswith("--resume runs/long") for t in texts)  # the bare resume, as written
    assert any("Ctrl-C" in c.comment for c in commands)  # the run a user interrupts before resuming it
    # continuation lines are joined into one command
    assert any("--agent.no-clip-value-loss" in t and "Pendulum-v1" in t for t in texts)
    skipped_texts = " ".join(c.text for c in skipped)
    assert "gcloud" in skipped_texts and "srun" in skipped_texts and "pip install" in skipped_texts
    assert not any(t.startswith("#") for t in texts)


def test_shortens_only_step_counts():
    shorten = check_readme.shorten
    assert shorten(["python", "scripts/train_anakin.py", "--total-steps", "3000000", "--num-envs", "8"], 100, 20000) \
        == ["python", "scripts/train_anakin.py", "--total-steps", "30000", "--num-envs", "8"]
    assert shorten(["python", "scripts/train_anakin.py", "--total-steps", "300000"], 100, 20000)[3] == "20000"
    assert shorten(["python", "scripts/train_anakin.py", "agent:impala"], 100, 20000) \
        == ["python", "scripts/train_anakin.py", "--total-steps", "20000", "agent:impala"]
    assert shorten(["python", "scripts/train_anakin.py", "--resume", "runs/long"], 100, 20000) \
        == ["python", "scripts/train_anakin.py", "--resume", "runs/long"]  # its own total, as a user would
    launched = shorten(["python", "scripts/launch_local.py", "--num-processes", "2", "--", "python",
                        "scripts/train_sebulba.py", "--lag", "1"], 100, 20000)
    assert launched[-4:] == ["--total-steps", "20000", "--lag", "1"] and launched[:4] == [
        "python", "scripts/launch_local.py", "--num-processes", "2"]
    assert shorten(["python", "scripts/train_anakin.py", "--checkpoint.stop-after-updates", "1000",
                    "--checkpoint.every-updates", "100", "--total-steps", "3000000"], 100, 20000)[3:8:2] == [
        "10", "1", "30000"]
    assert shorten(["python", "scripts/bench_anakin.py", "--out", "b.json"], 100, 20000)[2] == "--quick"


@pytest.mark.timeout(400)
def test_runs_the_custom_env_commands_with_the_extracted_file(tmp_path):
    out = tmp_path / "summary.json"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # a user's machine, not the 8-device test mesh
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_readme.py"), "--only", "my_pkg.walk",
                             "--keep", str(tmp_path / "cwd"), "--json", str(out)],
                            capture_output=True, text=True, timeout=380, env=env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = json.loads(out.read_text())
    assert summary["commands"] == 2 and summary["failed"] == 0
    assert (tmp_path / "cwd" / "my_pkg" / "walk.py").exists()
