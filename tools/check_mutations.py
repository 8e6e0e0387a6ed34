"""Check that the tests catch real bugs: apply each named mutation (`tools/mutations.py`) to a
copy of the tree, run the tests that name that code, and report caught / missed.

The working tree (tracked files and untracked ones git does not ignore, as they are now) is
copied once to a temporary folder. Each mutation replaces its exact text in one file of the copy
(it must be found exactly once: otherwise "mutation X no longer applies" and the check fails),
runs its tests there with this Python (`-m "not learning" -x -n 0`: ordinary tests must catch
it; the first failure is enough), then puts the file back. A mutation is *caught* when pytest
reports a failed test, *missed* when every selected test passes, an *error* otherwise (no test
collected, a crash, a timeout).

The copy, not this checkout, is what the child imports: an editable install maps `podrl`,
`podrl.agents` and `podrl.envs` to the checkout it was made from, so a `sitecustomize.py` first
on the child's PYTHONPATH puts a finder ahead of it that maps them (pyproject.toml's
`package-dir`) to the copy; before any mutation the check asks a child where those packages
and a test helper come from, and refuses to go on unless every answer lies in the copy. A test's
subprocess started with `user_env` or `cli_runs.run` (tests/cli_runs.py `child_pythonpath`) gets
that folder first on its PYTHONPATH too (`PODRL_MUTATION_SITE`), so it runs the mutant; one started
with another PYTHONPATH does not. Bytecode
is not written in the copy (`PYTHONDONTWRITEBYTECODE`), so a restored file is never shadowed by
the mutant's `.pyc`. Unless `--no-baseline`, the union of the selected tests first runs on the
clean copy and must pass.

Prints a table and a JSON summary; exits 0 only if every mutation run was caught.

`--fields` is the field-by-field guard instead (`tools/field_guard.py`): for every field of every agent
config and of each layout's run config, the mutation "the code reads the field's default instead of its
value", which fields no ordinary test notices, and whether each such field has its reason in
`tools/field_reasons.py`. Expensive: run it on demand, an agent at a time if need be (`--agent`).

Examples:
  python tools/check_mutations.py                      # all of them (on 2 cores: see CONTRIBUTING.md)
  python tools/check_mutations.py --only td3-no-policy-delay muzero-online-bootstrap
  python tools/check_mutations.py --list
  python tools/check_mutations.py --fields --agent ppo --jobs 2   # the guard for PPO's fields
  python tools/check_mutations.py --fields --agent dqn --field gamma n_step
  python tools/check_mutations.py --fields --list      # the fields and their reasons
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: tools/ is sys.path[0], the repository root is not
    sys.path.insert(0, str(ROOT))

from tools import field_guard  # noqa: E402
from tools.check_learning_tests import SITECUSTOMIZE_HEAD, failure_messages, outcomes  # noqa: E402
from tools.mutations import MUTATIONS, Mutation  # noqa: E402

PYTEST_ARGS = ("-m", "not learning", "-x", "-n", "0", "-q", "-p", "no:cacheprovider")
"""Always passed to the child pytest: ordinary tests only, stop at the first failure, one process."""

FINDER = '''

_MAPPING = {mapping!r}


class _CopyFinder:
    """Maps the installed package names to the copy's folders, ahead of any editable finder."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        where = _MAPPING.get(name)
        if where is None:
            return None
        return importlib.util.spec_from_file_location(name, os.path.join(where, "__init__.py"),
                                                      submodule_search_locations=[where])


sys.meta_path.insert(0, _CopyFinder)
_run_next_sitecustomize()
'''

WHERE = ("import podrl, podrl.agents, podrl.envs, podrl.agents.td3.agent, one_device; "
         "print('\\n'.join(m.__file__ for m in (podrl, podrl.agents, podrl.envs, podrl.agents.td3.agent, one_device)))")
"""Run in the child: the files the copy's tests would import (`one_device` is a helper in tests/)."""


class MutationError(RuntimeError):
    """A mutation that cannot be applied, or a copy that is not what the child imports."""


def apply(mutation: Mutation, root: Path) -> str:
    """Replaces `mutation.find` in `root / mutation.path`; returns the original text of the file.
    MutationError unless the text occurs exactly once."""
    path = root / mutation.path
    if not path.is_file():
        raise MutationError(f"mutation {mutation.name} no longer applies: {mutation.path} does not exist")
    original = path.read_text()
    count = original.count(mutation.find)
    if count != 1:
        found = "text not found" if count == 0 else f"text found {count} times"
        raise MutationError(f"mutation {mutation.name} no longer applies: {found} in {mutation.path}:\n"
                            f"{mutation.find}")
    path.write_text(original.replace(mutation.find, mutation.replace))
    return original


def copy_tree(destination: Path) -> None:
    """The working tree's tracked files and untracked, not ignored ones, as they are now."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is left out
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def child_env(copy: Path, patch_dir: Path) -> dict[str, str]:
    """The child's environment: the copy-mapping sitecustomize first, then the copy, on PYTHONPATH."""
    package_dir = tomllib.loads((copy / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    mapping = {name: str(copy / folder) for name, folder in package_dir.items()}
    (patch_dir / "sitecustomize.py").write_text(
        '"""Written by tools/check_mutations.py: the installed packages come from the copy."""\n'
        + SITECUSTOMIZE_HEAD + FINDER.format(mapping=mapping))
    paths = [str(patch_dir), str(copy), os.environ.get("PYTHONPATH", "")]
    # one compilation cache for every run: programs the mutation leaves alone compile once;
    # PODRL_MUTATION_SITE: tests/cli_runs.py's `child_pythonpath` (user_env, cli_runs.run) keeps it first
    # on a test subprocess's PYTHONPATH (the subprocess runs the mutant too)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "PYTHONDONTWRITEBYTECODE": "1",
            "JAX_COMPILATION_CACHE_DIR": str(patch_dir.parent / "jax-cache"), "PODRL_MUTATION_SITE": str(patch_dir)}


def check_imports_come_from(copy: Path, env: dict[str, str]) -> list[str]:
    """The files a child imports for podrl, its mapped packages and a test helper; MutationError
    unless all lie in `copy`."""
    child = subprocess.run([sys.executable, "-c", WHERE], cwd=copy, env={**env, "PYTHONPATH": os.pathsep.join(
        [env["PYTHONPATH"], str(copy / "tests")])}, capture_output=True, text=True, timeout=300)
    files = child.stdout.split()
    if child.returncode != 0 or len(files) != 5 or not all(Path(f).resolve().is_relative_to(copy.resolve())
                                                           for f in files):
        raise MutationError(f"the child does not import the copy {copy}: {files} {child.stderr[-2000:]}")
    return files


def run_tests(copy: Path, env: dict[str, str], tests: tuple[str, ...], junit: Path,
              timeout: float, census: bool = False) -> tuple[str, dict[str, str], float]:
    """Runs `tests` in `copy`: `(result, {failed test id: message}, seconds)`, result "passed", "failed" or
    "error: ..."; `census`: every test, not stopping at the first failure (`--fields`' census run)."""
    args = tuple(a for a in PYTEST_ARGS if a != "-x") if census else PYTEST_ARGS
    command = [sys.executable, "-m", "pytest", *args, f"--junitxml={junit}", *tests]
    start = time.monotonic()
    try:
        rc = subprocess.run(command, cwd=copy, env=env, timeout=timeout,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    except subprocess.TimeoutExpired:
        return f"error: timed out after {timeout:.0f} s", {}, time.monotonic() - start
    seconds = time.monotonic() - start
    results, failed = outcomes(junit), failure_messages(junit)
    if rc == 0 and results:
        return "passed", {}, seconds
    if rc == 1 and failed:
        return "failed", failed, seconds
    return f"error: pytest exit code {rc}, {len(results)} results", failed, seconds


def check(mutations: list[Mutation], copy: Path, env: dict[str, str], timeout: float) -> list[dict]:
    """Each mutation applied to `copy`, its tests run, the file restored: one row each."""
    rows = []
    for i, mutation in enumerate(mutations):
        original = apply(mutation, copy)
        try:
            result, failed, seconds = run_tests(copy, env, mutation.tests, copy.parent / f"m{i}.xml", timeout)
        finally:
            (copy / mutation.path).write_text(original)
        verdict = {"failed": "caught", "passed": "missed"}.get(result, result)
        test, message = next(iter(failed.items()), ("", ""))
        rows.append({"mutation": mutation.name, "file": mutation.path, "result": verdict, "caught_by": test,
                     "message": message, "seconds": round(seconds, 1), "bug": mutation.bug})
        shown = " | ".join(line.strip() for line in message.splitlines() if line.strip())
        print(f"[{i + 1}/{len(mutations)}] {mutation.name}: {verdict} {test} ({seconds:.0f} s)\n    {shown[:300]}",
              flush=True)
    return rows


def print_table(rows: list[dict]) -> None:
    width = max(len(r["mutation"]) for r in rows)
    print(f"\n{'mutation':<{width}}  {'result':<7}  {'s':>5}  caught by")
    for r in rows:
        print(f"{r['mutation']:<{width}}  {r['result']:<7}  {r['seconds']:>5.0f}  {r['caught_by']}")


def select(names: list[str] | None) -> list[Mutation]:
    """The mutations named (all when None); SystemExit naming an unknown one."""
    known = {m.name: m for m in MUTATIONS}
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise SystemExit(f"unknown mutations {unknown}; --list shows them")
    return [known[n] for n in names] if names else list(MUTATIONS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these mutations only")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--no-baseline", action="store_true", help="skip the run of the tests on the clean copy")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per pytest run (default 1200)")
    parser.add_argument("--json-out", help="also write the JSON summary (with every row) to this file")
    fields = parser.add_argument_group("the field-by-field guard (tools/field_guard.py)")
    fields.add_argument("--fields", action="store_true", help="run the field guard instead of the named mutations")
    fields.add_argument("--agent", dest="owner", nargs="+", metavar="NAME",
                        help="only these owners: agent names (ppo, dqn, ...) and/or the layouts anakin, sebulba")
    fields.add_argument("--field", nargs="+", metavar="FIELD", help="only these fields")
    fields.add_argument("--tests", nargs="+", metavar="TEST",
                        help="run these tests (pytest arguments) instead of those that name each owner")
    fields.add_argument("--jobs", type=int, default=1, help="mutation runs at once (default 1)")
    fields.add_argument("--cache", default=field_guard.default_cache(),
                        help="verdicts kept by field and tree digest; an unchanged tree's are not run again")
    fields.add_argument("--markdown", help="also write the verdicts as a Markdown table to this file")
    args = parser.parse_args(argv)
    if args.fields:
        return field_guard.run_fields(args, copy_tree, child_env, check_imports_come_from, run_tests)
    mutations = select(args.only)
    if args.list:
        for m in mutations:
            print(f"{m.name:<34} {m.path:<26} {m.bug}\n{'':<34} tests: {' '.join(m.tests)}")
        return 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="podrl-mutations-") as tmp:
        copy, patch_dir = Path(tmp) / "tree", Path(tmp) / "site"
        copy.mkdir(), patch_dir.mkdir()
        copy_tree(copy)
        for mutation in mutations:  # every text must apply before anything runs
            (copy / mutation.path).write_text(apply(mutation, copy))
        env = child_env(copy, patch_dir)
        print("the child imports: " + ", ".join(check_imports_come_from(copy, env)), flush=True)
        baseline = "skipped"
        if not args.no_baseline:
            tests = tuple(dict.fromkeys(t for m in mutations for t in m.tests))
            baseline, failed, seconds = run_tests(copy, env, tests, Path(tmp) / "baseline.xml", args.timeout)
            print(f"baseline on the clean copy: {baseline} {list(failed)[:3]} ({seconds:.0f} s)", flush=True)
            if baseline != "passed":
                print("the selected tests must pass on the clean copy first")
                return 1
        rows = check(mutations, copy, env, args.timeout)
    print_table(rows)
    summary = {"mutations": len(rows), "caught": sum(r["result"] == "caught" for r in rows),
               "missed": [r["mutation"] for r in rows if r["result"] == "missed"],
               "errors": [r["mutation"] for r in rows if r["result"] not in ("caught", "missed")],
               "baseline": baseline, "seconds": round(time.monotonic() - start)}
    summary["ok"] = summary["caught"] == len(rows)
    print(json.dumps(summary, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({**summary, "rows": rows}, indent=2))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except MutationError as error:
        sys.exit(f"error: {error}")
