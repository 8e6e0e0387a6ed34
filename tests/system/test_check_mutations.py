"""tools/check_mutations.py: every named mutation still applies to the code it names and names tests
that exist, a text that is gone fails loudly, and the child the check starts imports the copy it
mutates, not this checkout (whose editable install would otherwise win). The mutation runs
themselves take minutes: `python tools/check_mutations.py` (CONTRIBUTING.md)."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from tools import check_mutations
from tools.check_learning_tests import failure_messages, outcomes
from tools.mutations import MUTATIONS, Mutation

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_mutation_applies_once_changes_its_file_and_names_existing_tests(tmp_path):
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS)
    for mutation in MUTATIONS:
        copy = tmp_path / mutation.path
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / mutation.path, copy)
        original = check_mutations.apply(mutation, tmp_path)
        assert original == (ROOT / mutation.path).read_text()
        mutated = copy.read_text()
        assert mutated != original and mutated.count(mutation.replace) >= 1, mutation.name
        compile(mutated, mutation.path, "exec")  # still Python: the tests, not the import, must catch it
        for test in mutation.tests:
            assert (ROOT / test.split("::")[0]).is_file(), (mutation.name, test)


def test_a_mutation_whose_text_is_gone_fails_loudly(tmp_path):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "x.py").write_text("y = 1\n")
    gone = Mutation("gone", "agents/x.py", "y = 2", "y = 3", (), "")
    with pytest.raises(check_mutations.MutationError, match="mutation gone no longer applies: text not found"):
        check_mutations.apply(gone, tmp_path)
    twice = Mutation("twice", "agents/x.py", "1", "2", (), "")
    (tmp_path / "agents" / "x.py").write_text("y = 1\nz = 1\n")
    with pytest.raises(check_mutations.MutationError, match="text found 2 times"):
        check_mutations.apply(twice, tmp_path)


def test_the_child_imports_the_copy_not_this_checkout(tmp_path):
    copy, site = tmp_path / "tree", tmp_path / "site"
    copy.mkdir(), site.mkdir()
    check_mutations.copy_tree(copy)
    assert (copy / "agents" / "td3" / "agent.py").read_text() == (ROOT / "agents" / "td3" / "agent.py").read_text()
    files = check_mutations.check_imports_come_from(copy, check_mutations.child_env(copy, site))
    assert [pathlib.Path(f).relative_to(copy).as_posix() for f in files] == [
        "podrl/__init__.py", "agents/__init__.py", "envs/__init__.py", "agents/td3/agent.py", "tests/one_device.py"]


def test_the_junit_report_gives_each_failure_its_message(tmp_path):
    junit = tmp_path / "report.xml"
    junit.write_text('<testsuites><testsuite name="pytest">'
                     '<testcase classname="tests.agents.test_a" name="test_ok"/>'
                     '<testcase classname="tests.agents.test_a" name="test_bad"><failure message="assert 1.0 == 0.0">'
                     'traceback</failure></testcase>'
                     '<testcase classname="tests.agents.test_b" name="test_broken"><error message="ImportError"/>'
                     '</testcase></testsuite></testsuites>')
    assert outcomes(junit) == {"tests.agents.test_a::test_ok": "passed", "tests.agents.test_a::test_bad": "failed",
                               "tests.agents.test_b::test_broken": "error"}
    assert failure_messages(junit) == {"tests.agents.test_a::test_bad": "assert 1.0 == 0.0",
                                       "tests.agents.test_b::test_broken": "ImportError"}


# ---------------------------------------------------------------- the field guard (--fields)

FAKE_CONFIG = '''
import dataclasses


@dataclasses.dataclass(frozen=True)
class FakeConfig:
    gamma: float = 0.9
    width: int = 3
    unused: int = 7

    def __post_init__(self):
        if not 0 <= self.gamma <= 1:
            raise ValueError("gamma")

    def check_batch(self, n):
        return self.width * n
'''
FAKE_CODE = '''
def compute(config):
    return config.gamma * 10 + config.width
'''
FAKE_CLI = '''
from agents.fake_code import compute


def run(config):
    return compute(config)  # the code the command line calls computes


def show(config):
    return config.gamma  # the command line's own read: an observer's
'''
CHILD = '''
import dataclasses, importlib.util, json
from agents.fake_config import FakeConfig
from agents.fake_code import compute
spec = importlib.util.spec_from_file_location("fake_cli", "podrl/cli/fake_cli.py")
cli = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cli)
config = FakeConfig(gamma=0.5, width=3)
try:
    FakeConfig(gamma=2.0)
    refused = False
except ValueError:
    refused = True
print(json.dumps({"computed": compute(config), "cli_run": cli.run(config), "cli_show": cli.show(config),
                  "read": config.gamma, "validated": config.check_batch(2),
                  "refused": refused, "equal": config == FakeConfig(gamma=0.5), "saved": dataclasses.asdict(config)}))
'''


def guarded_child(tmp_path, mode: str, fields: list[str], end: str = "") -> tuple[dict, dict]:
    """Runs CHILD (then `end`) over a fake package (agents/fake_config.py, agents/fake_code.py) with the field
    guard's hook in `mode` on `fields` of FakeConfig: `(what CHILD printed, the census's counts)`."""
    import json
    import os
    import subprocess
    import sys

    root, site, out = tmp_path / mode / "tree", tmp_path / mode / "site", tmp_path / mode / "out"
    for folder in (root / "agents", root / "podrl" / "cli", site, out):
        folder.mkdir(parents=True)
    (root / "agents" / "__init__.py").write_text("")
    (root / "podrl" / "cli" / "fake_cli.py").write_text(FAKE_CLI)
    (root / "agents" / "fake_config.py").write_text(FAKE_CONFIG)
    (root / "agents" / "fake_code.py").write_text(FAKE_CODE)
    shutil.copy(ROOT / "tools" / "field_guard_hook.py", site)
    (site / "sitecustomize.py").write_text("import field_guard_hook  # noqa: F401\n")
    spec = {"mode": mode, "root": str(root), "classes": {"agents.fake_config": {"FakeConfig": fields}}, "out": str(out)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(root)]), "PODRL_FIELD_GUARD": json.dumps(spec)}
    child = subprocess.run([sys.executable, "-c", CHILD + end], cwd=root, env=env, capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == 0, child.stderr
    census = {}
    for path in out.glob("census-*.json"):
        census.update(json.loads(path.read_text()))
    return json.loads(child.stdout), census


def test_the_field_guard_gives_the_code_the_default_and_everyone_else_the_value(tmp_path):
    """Mutated, `gamma` is its default 0.9 to the code (compute: 0.9 * 10 + 3) and 0.5 to the test's own read,
    the validation (which still refuses 2.0), equality and the saved dict. The code the command line calls
    computes (`cli_run` is mutated too), the command line's own read is an observer's (`cli_show`). The census
    counts the code's reads: gamma twice at another value, width twice at its default, unused never."""
    got, _ = guarded_child(tmp_path, "mutate", ["gamma"])
    assert got == {"computed": 12.0, "cli_run": 12.0, "cli_show": 0.5, "read": 0.5, "validated": 6, "refused": True,
                   "equal": True, "saved": {"gamma": 0.5, "width": 3, "unused": 7}}
    got, census = guarded_child(tmp_path, "census", ["gamma", "width", "unused"])
    assert got["computed"] == 8.0
    assert census == {"agents.fake_config:FakeConfig.gamma": [0, 2], "agents.fake_config:FakeConfig.width": [2, 0],
                      "agents.fake_config:FakeConfig.unused": [0, 0]}
    # a child that ends by os._exit (no exit handlers, as a stalled command-line run) still leaves which kinds
    # of read it saw (written at the first of each)
    _, census = guarded_child(tmp_path / "hard", "census", ["gamma", "width", "unused"],
                              end="import os, sys\nsys.stdout.flush()\nos._exit(0)\n")
    assert census == {"agents.fake_config:FakeConfig.gamma": [0, 1], "agents.fake_config:FakeConfig.width": [1, 0],
                      "agents.fake_config:FakeConfig.unused": [0, 0]}


def test_the_field_guard_lists_every_field_of_every_agent_and_layout_config():
    import dataclasses

    from podrl.agents import AGENTS
    from podrl.anakin.config import AnakinConfig
    from podrl.sebulba.config import SebulbaConfig
    from tools import field_guard

    names = {t.name for t in field_guard.targets()}
    want = {f"{agent}.{f.name}" for agent, entry in AGENTS.items() for f in dataclasses.fields(entry.config)}
    want |= {f"{layout}.{f.name}" for layout, cls in (("anakin", AnakinConfig), ("sebulba", SebulbaConfig))
             for f in dataclasses.fields(cls) if f.name not in field_guard.NESTED}
    assert names == want
    assert "tests/agents/test_dqn.py" in field_guard.tests_for("dqn", ROOT)
    for key in field_guard.REASONS:  # every reason names a field the guard knows
        owner, field = key.split(".", 1)
        assert key in names or (owner == "*" and any(n.endswith(f".{field}") for n in names)), key


def test_the_second_pass_finds_the_other_tests_that_name_a_field(tmp_path):
    from tools import field_guard

    files = {"tests/core/test_a.py": "AnakinConfig(pbt_every=3)", "tests/cli/test_b.py": "['--pbt-every', '2']",
             "tests/core/test_c.py": "config.pbt_every", "tests/core/test_d.py": "pbt_every == 3; pbt_everyone=1",
             "tests/core/helper.py": "pbt_every=1", "tests/layouts/test_e.py": "pbt_every=1",
             "tests/system/test_check_mutations.py": "pbt_every=1"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    target = field_guard.Target("anakin", "podrl.anakin.config", "AnakinConfig", "pbt_every", 0)
    found = field_guard.naming_tests(target, tmp_path, exclude=("tests/layouts/test_e.py",))
    assert sorted(found) == ["tests/cli/test_b.py", "tests/core/test_a.py", "tests/core/test_c.py"]


def test_a_user_env_subprocess_of_a_mutation_run_imports_the_mutated_copy(monkeypatch, request, tmp_path):
    """`child_env` names its sitecustomize folder in PODRL_MUTATION_SITE; `user_env` puts it first on the
    subprocess's PYTHONPATH (so a command-line test runs the mutant), and leaves it out otherwise."""
    from tools import check_mutations

    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "site").mkdir()
    env = check_mutations.child_env(tmp_path / "tree", tmp_path / "site")
    assert env["PODRL_MUTATION_SITE"] == str(tmp_path / "site")
    monkeypatch.setenv("PODRL_MUTATION_SITE", env["PODRL_MUTATION_SITE"])
    assert request.getfixturevalue("user_env")["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "site"), str(ROOT)]


def test_user_env_without_a_mutation_run_has_only_the_checkout(monkeypatch, request):
    monkeypatch.delenv("PODRL_MUTATION_SITE", raising=False)
    assert request.getfixturevalue("user_env")["PYTHONPATH"] == str(ROOT)
