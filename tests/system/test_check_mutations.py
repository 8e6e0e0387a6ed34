"""tools/check_mutations.py: every named mutation still applies to the code it names and names tests
that exist, a text that is gone fails loudly, and the child the check starts imports the copy it
mutates, not this checkout (whose editable install would otherwise win). The mutation runs
themselves take minutes: `python tools/check_mutations.py` (CONTRIBUTING.md)."""

from __future__ import annotations

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
