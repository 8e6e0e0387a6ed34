"""Running the training scripts as a user does (in a working folder of the test's) and reading their errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_pythonpath() -> str:
    """A subprocess's PYTHONPATH: this checkout, after the mutated copy's sitecustomize folder when
    `tools/check_mutations.py` runs the tests (`PODRL_MUTATION_SITE`), so the subprocess runs the mutant."""
    return os.pathsep.join(filter(None, (os.environ.get("PODRL_MUTATION_SITE"), str(ROOT))))


def run(workdir: Path, script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "PODRL_DEBUG"}
    environ.update({"PYTHONPATH": child_pythonpath(), **(env or {})})
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], capture_output=True, text=True,
                          timeout=240, cwd=workdir, env=environ)


def assert_user_error(done: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit 2, one `error: ...` paragraph holding every fragment, no traceback; returns the message."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    assert lines and lines[0].startswith("error: "), done.stderr[-3000:]
    assert len(lines) == 2 and "--debug" in lines[1], lines  # the message, then the --debug hint
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
