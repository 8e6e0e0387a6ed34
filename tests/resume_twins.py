"""Helpers for resume tests that compare a resumed run with an uninterrupted twin.

`ConstantBandit` is an env whose episodes carry nothing over, so a Sebulba resume
(whose host envs start fresh episodes) sees exactly the data an uninterrupted run
sees; `saved_digests` reads the per-leaf sha256 digests a checkpoint step writes
beside its state, so two runs' saved states (params, optimizer state, env states,
keys) compare leaf by leaf from disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from dm_env import specs

import podrl.envs


class ConstantBandit:
    """A JAX env without state that matters: observation [1], reward = action (0 or 1),
    every step terminates. Fresh episodes after a resume see exactly the data an
    uninterrupted run would have seen, so a Sebulba resume must then match it bit for bit."""

    def reset(self, key):
        return jnp.zeros((), jnp.int32), podrl.envs.restart(jnp.ones((1,), jnp.float32))

    def step(self, state, action):
        reward = action.astype(jnp.float32)
        return state, podrl.envs.transition(jnp.ones((1,), jnp.float32), reward, jnp.bool_(True))

    def observation_spec(self):
        return specs.Array((1,), np.float32, name="observation")

    def action_spec(self):
        return specs.DiscreteArray(2, name="action")


def saved_digests(checkpoint_dir: Path, step: int) -> dict[str, dict[str, str]]:
    """`{"state": {leaf path: sha256}, "params": {...}}` of checkpoint `step` in `checkpoint_dir`."""
    return json.loads((Path(checkpoint_dir) / str(step) / "digest" / "metadata").read_text())


def assert_same_saved_state(resumed_dir: Path, twin_dir: Path, step: int) -> None:
    """Checkpoint `step` of a resumed run holds the same state, leaf by leaf (the optimizer
    state among them), as the same step of its uninterrupted twin."""
    resumed, twin = saved_digests(resumed_dir, step), saved_digests(twin_dir, step)
    assert any("opt_state" in path for path in twin["state"]), sorted(twin["state"])  # the optimizer is saved
    assert resumed["state"].keys() == twin["state"].keys()
    differ = [path for path in twin["state"] if resumed["state"][path] != twin["state"][path]]
    assert not differ, f"resumed state differs from the uninterrupted twin's at {differ}"
    assert resumed["params"] == twin["params"]
