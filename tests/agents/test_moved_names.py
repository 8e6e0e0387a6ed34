"""Names that moved to one home fail with a sentence that says where they are now."""

import importlib

import pytest

from podrl.agents import optimizers


@pytest.mark.parametrize("package, home", [("ppo", "make_optimizer"), ("impala", "make_optimizer"),
                                           ("pqn", "make_optimizer"), ("dqn", "per_update_optimizer")])
def test_an_agent_package_no_longer_re_exports_its_optimizer_and_says_where_it_is(package, home):
    module = importlib.import_module(f"podrl.agents.{package}")
    with pytest.raises(ImportError, match=f"from podrl.agents.optimizers import {home}"):
        module.make_optimizer
    with pytest.raises(ImportError, match=f"from podrl.agents.optimizers import {home}"):
        exec(f"from podrl.agents.{package} import make_optimizer")
    assert callable(getattr(optimizers, home))
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name
    assert importlib.import_module(f"podrl.agents.{package}.config")  # submodules still import as ever
    if package != "pqn":  # pqn's agent module uses make_optimizer itself
        with pytest.raises(ImportError, match=f"from podrl.agents.optimizers import {home}"):
            exec(f"from podrl.agents.{package}.agent import make_optimizer")
