"""Env names that almost match: close ids are suggested, a JAX env given to Sebulba's host forms points to 'jax:'."""

from __future__ import annotations

import pytest

import podrl.envs
from podrl.envs.adapters import JaxHostVectorEnv, make_host_env


def make_recall():
    """A factory of podrl's own JAX env (what `--env test_env_names:make_recall` names)."""
    return podrl.envs.make("RecallCue-v0")


@pytest.mark.parametrize("name, suggestion", [("Taxi-v3", "'Taxi-v4'"), ("CartPol-v1", "'CartPole-v1'"),
                                              ("MatchCue-v0", "'jax:MatchCue-v0'")])
def test_an_unknown_host_id_names_the_close_ones(name, suggestion):
    with pytest.raises(podrl.envs.UnknownEnvError) as info:
        make_host_env(name, 2)
    assert suggestion in str(info.value) and info.value.field == "env", str(info.value)


def test_an_unknown_jax_id_names_the_close_ones_and_a_gymnasium_id_its_layout():
    with pytest.raises(podrl.envs.UnknownEnvError, match=r"unknown env 'MatchCu-v0' \(did you mean 'MatchCue-v0'"):
        podrl.envs.make("MatchCu-v0")
    with pytest.raises(podrl.envs.UnknownEnvError, match="'Taxi-v4' is a gymnasium id, which the sebulba layout"):
        podrl.envs.make("Taxi-v4")
    with pytest.raises(podrl.envs.UnknownEnvError) as info:
        podrl.envs.make("Zzzzzz-v9")
    assert "did you mean" not in str(info.value)


def test_a_jax_env_factory_on_the_host_is_refused_with_the_jax_form():
    with pytest.raises(podrl.envs.UnknownEnvError) as info:
        make_host_env("test_env_names:make_recall", 2)
    message = str(info.value)
    assert "the factory returned RecallCue" in message and "'jax:test_env_names:make_recall' steps it" in message
    env = make_host_env("jax:test_env_names:make_recall", 2)
    assert isinstance(env, JaxHostVectorEnv)
    env.close()
