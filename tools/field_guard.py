"""The field-by-field guard, `python tools/check_mutations.py --fields`: for every field of every agent config
(`podrl.agents.AGENTS`, their inherited fields included) and of each layout's run config (`AnakinConfig`,
`SebulbaConfig`, `RunConfig`'s fields included), the mutation "the code reads this field's default instead
of its value", and which fields no ordinary test notices.

**The rewrite.** The field becomes a descriptor on the config class (`tools/field_guard_hook.py`, installed in
the child by its sitecustomize when the module is imported) that returns the default to every read *by the
code* and the value to every other reader. That models "the code ignored the field" more faithfully than
rewriting `config.<field>` reads in the source: it catches every alias (`cfg.x`, `parts.config.x`,
`self.x`, `getattr(config, name)`) in every module that computes, shared ones included, while validation,
the saved config.json, equality / hashing (a config as a static argument) and the tests' own reads (their
NumPy expectations) keep the value, so a test fails only if the code's behaviour changed. Nothing in the
copy is rewritten, so every field runs against the same copy, in parallel (`--jobs`).

**The census first.** Per owner (an agent, or a layout) one run of its tests counts the code's reads of each
field and whether they saw a value other than the default: a field read only at its default (no test sets
another value), or never read by the code under those tests, cannot be caught; it is reported so without a
mutation run. Every other field gets its mutation run (`-m "not learning" -x`, stopping at the first failure).

**The tests.** An agent's are the ordinary tests under tests/agents/ that name it (its config class or its
package); a layout's, those under tests/layouts/ and tests/run/ that name its config or train function.
A test's subprocess started with `user_env` or `cli_runs.run` (command-line tests; one given no env inherits it)
runs the mutated copy and its reads are counted; one started with another PYTHONPATH runs the unmutated
checkout (a limit: such a subprocess cannot catch a field).

**A second pass over the tests that name the field.** The owner's tests are a selection by file; a field
they leave uncaught (missed, default only, not read) gets a census and, if read at another value, a mutation
run over every other ordinary test file that names it (`naming_tests`: `field=`, `.field`, `"field"` or the
command line's `-field-name`; the smallest `WIDER_LIMIT` files), e.g. the population's fields, exercised in
tests/core. Its verdict replaces the first one only when it is caught.

**The verdicts.** caught (by which test), missed, not read, default only, or error; then each field not
caught is looked up in `REASONS` (field -> why no test can see it) and is *explained* or *unexplained*; a
reason for a field that is caught is *stale*. The check exits 1 on any unexplained or stale row or error.
Verdicts are cached (`--cache`) by field and by a digest of the code (`code_digest`): a field caught stays
caught while the test that caught it is unchanged; any other verdict is redone once the owner's tests change,
or at every run if other tests name the field.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import importlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from tools.field_reasons import REASONS

LAYOUTS = {"anakin": ("podrl.anakin.config", "AnakinConfig", ("AnakinConfig", "train_anakin")),
           "sebulba": ("podrl.sebulba.config", "SebulbaConfig", ("SebulbaConfig", "train_sebulba"))}
"""Layout -> (module, config class, names whose presence in a test file selects it)."""
NESTED = {"logging", "checkpoint"}
"""Run-config fields that are configs themselves (log and save options, not computation): not mutated whole."""
HOOK = Path(__file__).with_name("field_guard_hook.py")


class Target(NamedTuple):
    """One field of one config class: `owner` ("ppo", ..., "anakin", "sebulba") and the class that holds it."""

    owner: str
    module: str
    cls: str
    field: str
    default: Any

    @property
    def key(self) -> str:
        """The hook's name for it ("module:Class.field")."""
        return f"{self.module}:{self.cls}.{self.field}"

    @property
    def name(self) -> str:
        return f"{self.owner}.{self.field}"


def owners() -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """Every owner: name -> (config module, class, names that select its tests)."""
    from podrl.agents import AGENTS

    found = {name: (entry.config.__module__, entry.config.__name__,
                    (entry.config.__name__, f"agents.{name}", f"agents import {name}"))
             for name, entry in AGENTS.items()}
    return {**found, **LAYOUTS}


def targets(selected: list[str] | None = None, fields: list[str] | None = None) -> list[Target]:
    """The fields of the selected owners (all by default), optionally only those named `fields`."""
    unknown = sorted(set(selected or ()) - set(owners()))
    if unknown:
        raise SystemExit(f"unknown owners {unknown}; expected some of {sorted(owners())}")
    out = []
    for owner, (module, cls_name, _) in owners().items():
        if selected and owner not in selected:
            continue
        cls = getattr(importlib.import_module(module), cls_name)
        for field in dataclasses.fields(cls):
            if (fields and field.name not in fields) or (owner in LAYOUTS and field.name in NESTED):
                continue
            default = field.default_factory() if field.default is dataclasses.MISSING else field.default
            out.append(Target(owner, module, cls_name, field.name, default))
    return out


def tests_for(owner: str, root: Path) -> tuple[str, ...]:
    """The ordinary test files that name `owner` (module docstring), smallest first."""
    names = owners()[owner][2]
    folders = ("tests/layouts", "tests/run") if owner in LAYOUTS else ("tests/agents",)
    files = [path for folder in folders for path in sorted((root / folder).glob("test_*.py"))
             if any(name in path.read_text() for name in names)]
    return tuple(str(path.relative_to(root)) for path in sorted(files, key=lambda p: p.stat().st_size))


WIDER_LIMIT = 12
"""At most this many files (the smallest) in a field's second pass."""
NOT_WIDER = ("tests/system/test_check_mutations.py",)
"""Test files never in a second pass: they run this tool itself."""
UNCAUGHT = ("missed", "default only", "not read")


def naming_tests(target: Target, root: Path, exclude: tuple[str, ...]) -> tuple[str, ...]:
    """The ordinary test files of `root`/tests, other than `exclude`, whose text names the field as a keyword
    argument, an attribute, a string or a command-line flag; the smallest `WIDER_LIMIT`, smallest first."""
    field, flag = re.escape(target.field), re.escape(target.field.replace("_", "-"))
    pattern = re.compile(rf"\b{field}\s*=(?!=)|\.{field}\b|[\"']{field}[\"']|[-.]{flag}\b")
    files = [path for path in sorted((root / "tests").rglob("test_*.py"))
             if str(path.relative_to(root)) not in exclude + NOT_WIDER and pattern.search(path.read_text())]
    files = sorted(files, key=lambda p: p.stat().st_size)[:WIDER_LIMIT]
    return tuple(str(path.relative_to(root)) for path in files)


def reason_for(target: Target) -> str | None:
    """The explanation `REASONS` gives the field (by "owner.field", or "*.field" for every owner)."""
    return REASONS.get(target.name) or REASONS.get(f"*.{target.field}")


def digest_of(root: Path, paths: list[Path]) -> str:
    """sha256 (16 hex digits) of these files' names (relative to `root`) and contents."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(root)).encode() + (path.read_bytes() if path.is_file() else b""))
    return digest.hexdigest()[:16]


def code_digest(root: Path) -> str:
    """The digest of what every verdict depends on: the packages, the tests' shared helpers (the files of
    tests/ that are not test modules) and the hook."""
    files = [p for folder in ("podrl", "agents", "envs") for p in sorted((root / folder).rglob("*.py"))]
    files += [p for p in sorted((root / "tests").rglob("*.py")) if not p.name.startswith("test_")]
    return digest_of(root, files + [root / "tools" / HOOK.name])


def test_file(test_id: str) -> str:
    """The file of a junit test id ("tests.agents.test_dqn::test_x[1]" -> "tests/agents/test_dqn.py")."""
    return test_id.split("::")[0].replace(".", "/") + ".py"


def still_valid(row: dict[str, Any] | None, root: Path, tests_digest: str) -> bool:
    """Whether a cached verdict (keyed by the code digest) holds: a field caught stays caught while the
    test that caught it is unchanged (more tests cannot miss it); any other verdict only while the owner's
    tests are all unchanged."""
    if row is None:
        return False
    if row["result"] == "caught":
        return row.get("test_digest") == digest_of(root, [root / test_file(row["caught_by"])])
    # an uncaught verdict holds only if no other test named the field (a second pass is redone each time)
    return row.get("tests_digest") == tests_digest and row.get("second_pass") == []


def guard_env(env: dict[str, str], copy: Path, mode: str, chosen: list[Target], out: Path) -> dict[str, str]:
    """The child's environment with `PODRL_FIELD_GUARD` naming `chosen`'s fields in `mode`."""
    classes: dict[str, dict[str, list[str]]] = {}
    for t in chosen:
        classes.setdefault(t.module, {}).setdefault(t.cls, []).append(t.field)
    spec = {"mode": mode, "root": str(copy), "classes": classes, "out": str(out)}
    return {**env, "PODRL_FIELD_GUARD": json.dumps(spec)}


def read_census(out: Path) -> dict[str, list[int]]:
    """`{key: [reads at the default, reads of another value]}` summed over the census's processes."""
    total: dict[str, list[int]] = {}
    for path in out.glob("census-*.json"):
        for key, (at_default, other) in json.loads(path.read_text()).items():
            counts = total.setdefault(key, [0, 0])
            counts[0], counts[1] = counts[0] + at_default, counts[1] + other
    return total


class Runner:
    """Runs an owner's tests in the copy: `run_tests(copy, env, tests, junit, timeout, args)` of
    tools/check_mutations.py (passed in: it owns the child's pytest arguments)."""

    def __init__(self, copy: Path, env: dict[str, str], run_tests, timeout: float, work: Path):
        self.copy, self.env, self.run_tests, self.timeout, self.work = copy, env, run_tests, timeout, work
        self.count = 0

    def _folder(self) -> Path:
        self.count += 1
        folder = self.work / f"run{self.count}"
        folder.mkdir()
        return folder

    def census(self, owner: str, chosen: list[Target], tests: tuple[str, ...]) -> tuple[str, dict[str, list[int]]]:
        """`(result, counts)` of one run of `tests` counting the code's reads of `chosen` (no -x)."""
        folder = self._folder()
        env = guard_env(self.env, self.copy, "census", chosen, folder)
        result, failed, seconds = self.run_tests(self.copy, env, tests, folder / "junit.xml", self.timeout,
                                                 census=True)
        print(f"census of {owner}: {result} {list(failed)[:2]} ({seconds:.0f} s, {len(tests)} files)", flush=True)
        return result, read_census(folder)

    def mutate(self, target: Target, tests: tuple[str, ...]) -> dict[str, Any]:
        """One field's mutation run: its verdict row."""
        folder = self._folder()
        env = guard_env(self.env, self.copy, "mutate", [target], folder)
        result, failed, seconds = self.run_tests(self.copy, env, tests, folder / "junit.xml", self.timeout)
        verdict = {"failed": "caught", "passed": "missed"}.get(result, result)
        test, message = next(iter(failed.items()), ("", ""))
        print(f"{target.name}: {verdict} {test} ({seconds:.0f} s)", flush=True)
        return {"result": verdict, "caught_by": test, "message": message[:300], "seconds": round(seconds, 1)}


def judge(target: Target, row: dict[str, Any]) -> dict[str, Any]:
    """`row` with the field's name, default, reason and status (explained, unexplained, stale, ok, error)."""
    reason = reason_for(target)
    result = row["result"]
    if result == "caught":
        status = "stale" if reason else "ok"
    elif result in ("missed", "not read", "default only"):
        status = "explained" if reason else "unexplained"
    else:
        status = "error"
    return {"field": target.name, "default": repr(target.default), **row, "reason": reason or "", "status": status}


def verdict_row(result: str) -> dict[str, Any]:
    """A verdict without a mutation run (no test caught it, none ran)."""
    return {"result": result, "caught_by": "", "message": "", "seconds": 0}


def unread_row(target: Target, counts: dict[str, list[int]]) -> dict[str, Any]:
    """The verdict of a field the census never saw read at another value: "default only" or "not read"."""
    return verdict_row("default only" if counts.get(target.key, [0, 0])[0] else "not read")


def guard_owner(runner: Runner, owner: str, chosen: list[Target], cache: dict[str, Any], digest: str,
                jobs: int, tests: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The rows of one owner's fields: cached ones still valid (`still_valid`), then a census, then the
    mutation runs it calls for; `tests`: these instead of `tests_for(owner)`."""
    tests = tests or tests_for(owner, runner.copy)
    tests_digest = digest_of(runner.copy, [runner.copy / t.split("::")[0] for t in tests]) + ":" + " ".join(tests)
    rows = {t.name: cache[f"{digest}:{t.name}"] for t in chosen
            if still_valid(cache.get(f"{digest}:{t.name}"), runner.copy, tests_digest)}
    todo = [t for t in chosen if t.name not in rows]
    if todo:
        result, counts = runner.census(owner, todo, tests)
        if result != "passed":
            return [judge(t, verdict_row(f"error: census {result}")) for t in chosen]
        run = [t for t in todo if counts.get(t.key, [0, 0])[1] > 0]
        rows.update({t.name: unread_row(t, counts) for t in todo if t not in run})
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for t, row in zip(run, pool.map(lambda t: runner.mutate(t, tests), run)):
                rows[t.name] = row
        for t in todo:
            rows[t.name]["tests_digest"] = tests_digest
        for t in [t for t in todo if rows[t.name]["result"] in UNCAUGHT]:
            wider = naming_tests(t, runner.copy, tests)
            rows[t.name]["second_pass"] = list(wider)
            if wider:
                row = second_pass(runner, t, wider)
                # a verdict from other tests than the owner's is redone on the next run unless caught
                row["tests_digest"] = tests_digest + "+" + digest_of(runner.copy, [runner.copy / w for w in wider])
                if row["result"] == "caught":
                    rows[t.name] = row
        for t in todo:
            row = rows[t.name]
            if row["result"] == "caught":
                row["test_digest"] = digest_of(runner.copy, [runner.copy / test_file(row["caught_by"])])
            cache[f"{digest}:{t.name}"] = row
    return [judge(t, rows[t.name]) for t in chosen]


def second_pass(runner: Runner, target: Target, wider: tuple[str, ...]) -> dict[str, Any]:
    """The field's verdict over `wider` (the other tests that name it): a census, then a mutation run if read
    at another value; the row says which tests (`second_pass`)."""
    result, counts = runner.census(f"{target.name} (tests naming it)", [target], wider)
    if result != "passed":
        row = verdict_row(f"error: census {result}")
    elif counts.get(target.key, [0, 0])[1] > 0:
        row = runner.mutate(target, wider)
    else:
        row = unread_row(target, counts)
    return {**row, "second_pass": list(wider)}


def markdown(rows: list[dict[str, Any]]) -> str:
    """The verdicts as a Markdown table."""
    lines = ["| field | default | result | caught by / reason | status |", "|---|---|---|---|---|"]
    for r in rows:
        why = r["caught_by"] if r["result"] == "caught" else r["reason"]
        lines.append(f"| {r['field']} | `{r['default']}` | {r['result']} | {why.replace('|', '/')} | {r['status']} |")
    return "\n".join(lines) + "\n"


def run_fields(args, copy_tree, child_env, check_imports_come_from, run_tests) -> int:
    """`--fields`: the guard over the selected owners and fields (module docstring); 0 when no row is
    unexplained, stale or an error."""
    chosen = targets(args.owner, args.field)
    if args.list:
        for t in chosen:
            print(f"{t.name:<40} {t.default!r:<20} {reason_for(t) or ''}")
        return 0
    cache_path = Path(args.cache)
    cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="podrl-fields-") as tmp:
        copy, patch_dir, work = Path(tmp) / "tree", Path(tmp) / "site", Path(tmp) / "runs"
        for folder in (copy, patch_dir, work):
            folder.mkdir()
        copy_tree(copy)
        env = child_env(copy, patch_dir)
        shutil.copy2(HOOK, patch_dir / HOOK.name)
        with open(patch_dir / "sitecustomize.py", "a") as f:
            f.write("\nif os.environ.get('PODRL_FIELD_GUARD'):\n    import field_guard_hook  # noqa: F401\n")
        check_imports_come_from(copy, env)
        runner, digest, rows = Runner(copy, env, run_tests, args.timeout, work), code_digest(copy), []
        for owner in dict.fromkeys(t.owner for t in chosen):
            rows += guard_owner(runner, owner, [t for t in chosen if t.owner == owner], cache, digest, args.jobs,
                                tuple(args.tests) if args.tests else None)
            cache_path.write_text(json.dumps(cache, indent=1))
    bad = [r for r in rows if r["status"] in ("unexplained", "stale", "error")]
    print("\n" + markdown(rows))
    summary = {"fields": len(rows), "caught": sum(r["result"] == "caught" for r in rows),
               "explained": sum(r["status"] == "explained" for r in rows),
               "unexplained": [r["field"] for r in rows if r["status"] == "unexplained"],
               "stale": [r["field"] for r in rows if r["status"] == "stale"],
               "errors": [r["field"] for r in rows if r["status"] == "error"],
               "seconds": round(time.monotonic() - start)}
    print(json.dumps(summary, indent=2))
    if args.markdown:
        Path(args.markdown).write_text(markdown(rows))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({**summary, "rows": rows}, indent=2))
    return 1 if bad else 0


def default_cache() -> str:
    return os.path.join(tempfile.gettempdir(), "podrl-field-guard.json")
