"""The env-name table (`podrl.envs.schemes`): every scheme dispatches to its row's builder in each layout
that takes it, a layout refuses another layout's scheme naming both, an unknown scheme is an error
naming the valid forms, and the help texts list every form of their layout and none of the other's."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import podrl.envs
from dev_extra import require
from podrl.envs import schemes
from podrl.envs.adapters.make import make_host_env
from podrl.envs.errors import ConfigError
from podrl.envs.registry import UnknownEnvError, check_name
from podrl.envs.schemes import FORMS, LAYOUTS, SCHEMES, expected, forms, help_text, split


def test_split_tells_a_scheme_from_a_plain_name():
    assert split("gymnax:Breakout-MinAtar") == (SCHEMES["gymnax"], "Breakout-MinAtar")
    assert split("dm_env:my_pkg.envs:make") == (SCHEMES["dm_env"], "my_pkg.envs:make")  # the import path whole
    assert split("ale:Pong")[0].scheme == "ale" and split("dmc:cheetah-run")[0].scheme == "dmc"
    assert split("brax:ant,backend=spring") == (SCHEMES["brax"], "ant,backend=spring")
    assert split("jumanji:Snake-v1,time_limit=50") == (SCHEMES["jumanji"], "Snake-v1,time_limit=50")
    assert split("xminigrid:MiniGrid-DoorKey-5x5") == (SCHEMES["xminigrid"], "MiniGrid-DoorKey-5x5")
    assert split("my_envs:Chain") == (None, "my_envs:Chain")  # not a scheme: a module:attr import path
    assert split("CartPole-v1") == (None, "CartPole-v1")


def test_the_table_names_every_scheme_once_and_every_builder_resolves():
    assert set(SCHEMES) == {"jax", "gymnax", "craftax", "brax", "jumanji", "xminigrid", "ale", "envpool", "dm_env",
                            "dmc"}
    assert len([f for f in FORMS if f.scheme is not None]) == len(SCHEMES)
    for form in FORMS:
        assert form.anakin or form.sebulba, form
        if form.anakin:
            module = importlib.import_module(form.anakin)
            assert callable(module.make) and callable(module.check_name), form
        if form.sebulba:
            module, _, function = form.sebulba.partition(":")
            assert callable(getattr(importlib.import_module(module), function)), form
    assert {s for s, f in SCHEMES.items() if f.anakin} == {"gymnax", "craftax", "brax", "jumanji", "xminigrid"}
    assert {s for s, f in SCHEMES.items() if f.sebulba} == set(SCHEMES)  # Sebulba steps JAX envs on the host too


@pytest.mark.parametrize("scheme", [s for s, f in SCHEMES.items() if f.anakin])
def test_an_anakin_scheme_dispatches_to_its_module(scheme, monkeypatch):
    module = importlib.import_module(SCHEMES[scheme].anakin)
    calls = []
    monkeypatch.setattr(module, "make", lambda name, **kwargs: calls.append(("make", name, kwargs)) or "built")
    monkeypatch.setattr(module, "check_name", lambda name: calls.append(("check", name)))
    assert podrl.envs.make(f"{scheme}:Thing,x=1", y=2) == "built"
    check_name(f"{scheme}:Thing")
    assert calls == [("make", f"{scheme}:Thing,x=1", {"y": 2}), ("check", f"{scheme}:Thing")]


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_a_sebulba_scheme_dispatches_to_its_builder(scheme, monkeypatch):
    module, _, function = SCHEMES[scheme].sebulba.partition(":")
    calls = []

    def builder(name, num_envs, seed, vectorization, **options):
        calls.append((name, num_envs, seed, vectorization, options))
        return "built"

    monkeypatch.setattr(importlib.import_module(module), function, builder)
    assert make_host_env(f"{scheme}:Thing", 3, seed=5, vectorization="async", opt=1) == "built"
    assert calls == [(f"{scheme}:Thing", 3, 5, "async", {"opt": 1})]


def test_the_builders_build():
    env = make_host_env("jax:MatchSign-v0", 2)  # 'jax:' strips the scheme: podrl.envs.make("MatchSign-v0")
    assert env.num_envs == 2 and env.observation_spec().shape == (1,)
    env.close()
    require("brax.envs", "brax")
    with pytest.raises(UnknownEnvError, match="did you mean"):  # Sebulba takes 'brax:' as it is, as 'gymnax:'
        make_host_env("brax:invertedpendulum", 1)


@pytest.mark.parametrize("name", ["jax:CartPole-v1", "ale:Pong", "envpool:Pong-v5", "dm_env:pkg:f",
                                  "dmc:cartpole-swingup"])
def test_anakin_refuses_a_host_scheme_naming_the_layout_that_takes_it(name):
    with pytest.raises(UnknownEnvError) as info:
        podrl.envs.make(name)
    message = str(info.value)
    assert info.value.field == "env" and f"env {name!r}" in message and "is for the sebulba layout" in message
    assert message.endswith(f"the anakin layout takes {expected('anakin')}"), message
    with pytest.raises(UnknownEnvError, match="is for the sebulba layout"):
        check_name(name)


@pytest.mark.parametrize("layout, build", [("anakin", podrl.envs.make), ("sebulba", lambda n: make_host_env(n, 1))])
def test_an_unknown_scheme_is_an_error_naming_the_valid_forms(layout, build):
    with pytest.raises(UnknownEnvError) as info:
        build("nosuchscheme:Pong")
    message = str(info.value)
    assert "cannot import module 'nosuchscheme'" in message
    for form in forms(layout):
        assert form.syntax in message, (form, message)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_help_text_lists_every_form_of_its_layout_and_no_other(layout):
    text = help_text(layout)
    assert text[0].isupper() and text.endswith(".") and len(forms(layout)) >= 5
    listed = text[0].lower() + text[1:]  # the first form, capitalised, starts the sentence
    for form in FORMS:
        assert (f"{form.syntax} ({form.about})" in listed) == (form in forms(layout)), (form, text)


def test_host_options_are_checked_where_the_scheme_knows_them():
    with pytest.raises(ConfigError, match="^env_kwargs: "):
        schemes.check_host_options("ale:Pong", {"protocol": "nope"})
    schemes.check_host_options("ale:Pong", {"protocol": "dqn", "full_action_space": True})
    schemes.check_host_options("CartPole-v1", {"anything": np.float32(1)})  # a constructor's business
    schemes.check_host_options("envpool:Pong-v5", {"anything": 1})
