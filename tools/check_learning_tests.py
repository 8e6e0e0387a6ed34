"""Check that the learning tests can fail: they pass when agents learn and fail when they can't.

Runs the tests marked `@pytest.mark.learning` twice:

1. normally: every one must pass;
2. with optimizer updates disabled: every one must FAIL.

Updates are disabled by a `sitecustomize.py` put first on PYTHONPATH (so pytest
and every subprocess it starts load it) that replaces `optax.apply_updates`,
through which the agents apply every update (agents/actor_critic.py,
`sgd_step`), by a function returning the params unchanged. The patch is
installed lazily, when optax is first imported, so JAX still starts after
tests/conftest.py has set its flags. Each process that calls the patched
function leaves a marker file, so the check also proves the patch was used. A
`sitecustomize` that the environment already had is still run (found further
along sys.path); the worktree stays first after the patch folder on PYTHONPATH.

Prints a per-test table and a JSON summary; exits 0 only if both conditions
hold (and at least one learning test ran), 1 otherwise.

Examples:
  python tools/check_learning_tests.py
  python tools/check_learning_tests.py -k readme        # a subset
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SITECUSTOMIZE_HEAD = '''import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run_next_sitecustomize():
    """Runs the sitecustomize this one shadows, if any (further along sys.path)."""
    rest = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
'''
"""The start of a `sitecustomize.py` put first on a child's PYTHONPATH: imports, `_HERE` (its folder)
and `_run_next_sitecustomize()`, which its end calls so the environment's own one still runs."""

SITECUSTOMIZE = '''"""Written by tools/check_learning_tests.py: optax.apply_updates returns params unchanged."""
''' + SITECUSTOMIZE_HEAD + '''

def _frozen_apply_updates(params, updates):
    with open(os.path.join(_HERE, "patched-%d" % os.getpid()), "w"):
        pass
    return params


class _PatchOptax(importlib.abc.MetaPathFinder):
    """Patches optax right after its first import (importing it here would start JAX too early)."""

    def find_spec(self, name, path, target=None):
        if name != "optax":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            module.apply_updates = _frozen_apply_updates

        spec.loader.exec_module = exec_and_patch
        return spec


sys.meta_path.insert(0, _PatchOptax())
_run_next_sitecustomize()
'''


def run_pytest(label: str, extra_pythonpath: str | None, junit: Path, pytest_args: list[str]) -> int:
    """Runs the learning tests; results go to `junit` (JUnit XML). Returns pytest's exit code."""
    paths = [p for p in (extra_pythonpath, str(ROOT), os.environ.get("PYTHONPATH")) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    command = [sys.executable, "-m", "pytest", "-m", "learning", "-q", "-p", "no:cacheprovider",
               f"--junitxml={junit}", *pytest_args]
    print(f"[{label}] {' '.join(command)}", flush=True)
    return subprocess.run(command, cwd=ROOT, env=env).returncode


def _cases(junit: Path):
    """`(test id, {tag: element})` of each test case of a JUnit XML report (none if it is missing)."""
    if not junit.exists():
        return
    for case in ET.parse(junit).getroot().iter("testcase"):
        yield f"{case.get('classname', '')}::{case.get('name', '')}", {child.tag: child for child in case}


def outcomes(junit: Path) -> dict[str, str]:
    """{test id: passed | failed | error | skipped} from a JUnit XML report."""
    results = {}
    for name, children in _cases(junit):
        kind = next((k for k in ("failure", "error", "skipped") if k in children), "passed")
        results[name] = {"failure": "failed"}.get(kind, kind)
    return results


def failure_messages(junit: Path) -> dict[str, str]:
    """{test id: its failure's or error's message} for the tests that failed in a JUnit XML report."""
    messages = {}
    for name, children in _cases(junit):
        kind = next((k for k in ("failure", "error") if k in children), None)  # (an Element without children is falsy)
        if kind is not None:
            messages[name] = children[kind].get("message", "")
    return messages


def summarize(normal: dict[str, str], frozen: dict[str, str], patched: int) -> dict:
    tests = sorted(set(normal) | set(frozen))
    rows = [{"test": t, "normal": normal.get(t, "missing"), "updates_disabled": frozen.get(t, "missing")}
            for t in tests]
    for row in rows:
        row["ok"] = row["normal"] == "passed" and row["updates_disabled"] == "failed"
    return {
        "tests": len(rows),
        "all_pass_normally": bool(rows) and all(r["normal"] == "passed" for r in rows),
        "all_fail_without_updates": bool(rows) and all(r["updates_disabled"] == "failed" for r in rows),
        "processes_that_used_the_patch": patched,
        "ok": bool(rows) and all(r["ok"] for r in rows) and patched > 0,
        "rows": rows,
    }


def print_table(summary: dict) -> None:
    width = max([len(r["test"]) for r in summary["rows"]] + [4])
    print(f"\n{'test':<{width}}  {'normal':<8}  {'no updates':<10}  ok")
    for r in summary["rows"]:
        print(f"{r['test']:<{width}}  {r['normal']:<8}  {r['updates_disabled']:<10}  {'yes' if r['ok'] else 'NO'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="Any further arguments go to pytest (e.g. -k readme).")
    parser.add_argument("--json-out", help="also write the JSON summary to this file")
    args, pytest_args = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory(prefix="podrl-learning-check-") as tmp:
        tmp = Path(tmp)
        patch_dir = tmp / "frozen"
        patch_dir.mkdir()
        (patch_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
        run_pytest("normal", None, tmp / "normal.xml", pytest_args)
        run_pytest("updates disabled", str(patch_dir), tmp / "frozen.xml", pytest_args)
        patched = len(list(patch_dir.glob("patched-*")))
        summary = summarize(outcomes(tmp / "normal.xml"), outcomes(tmp / "frozen.xml"), patched)
    print_table(summary)
    text = json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=2))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
