"""A missing optional backend is a MissingExtraError naming its pip extra (`podrl.envs.adapters.optional`),
with the Python versions it has no wheels for (dm_control on 3.13: the dev extra leaves it out there)."""

from __future__ import annotations

import sys

import pytest

import dev_extra
from podrl.envs.adapters.dmc import task_names
from podrl.envs.adapters.make import make_host_env
from podrl.envs.adapters.optional import MissingExtraError, wheel_note


@pytest.mark.parametrize("build", [lambda name: make_host_env(name, 1), lambda name: task_names()])
def test_a_missing_dm_control_names_the_dmc_extra(monkeypatch, build):
    monkeypatch.setitem(sys.modules, "dm_control", None)  # import dm_control raises ImportError
    monkeypatch.setitem(sys.modules, "dm_control.suite", None)
    with pytest.raises(MissingExtraError, match=r"dm_control suite environments need dm_control: "
                                                r"pip install 'podrl\[dmc\]'") as error:
        build("dmc:cartpole-swingup")
    assert ("labmaze has no wheel" in str(error.value)) == (sys.version_info >= (3, 13))


def test_the_note_names_the_pythons_without_wheels():
    assert wheel_note("dmc", (3, 12, 1)) == "" and wheel_note("gymnax", (3, 13, 0)) == ""
    for version in [(3, 13, 0), (3, 14)]:
        assert wheel_note("dmc", version).startswith("; dm_control's labmaze has no wheel for Python 3.13")
        assert wheel_note("dmc", version).endswith("use Python 3.11 or 3.12 for dmc: envs")


def test_the_tests_skip_only_what_the_dev_extra_leaves_out():
    """tests/dev_extra.py: a package the dev extra installs here is imported, and a missing one is an error, not a
    skip; dm_control (no labmaze wheel on 3.13) is left out exactly where pyproject.toml's marker says."""
    assert dev_extra.left_out("brax") is None and dev_extra.left_out("tensorboardX") is None
    assert (dev_extra.left_out("dm_control") is None) == (sys.version_info < (3, 13))
    with pytest.raises(ModuleNotFoundError):
        dev_extra.require("podrl_no_such_module", "brax")  # brax is in the dev extra everywhere: no skip
    with pytest.raises(KeyError, match="not in pyproject.toml's dev extra"):
        dev_extra.left_out("torch")
