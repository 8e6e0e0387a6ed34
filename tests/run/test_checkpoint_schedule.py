"""The checkpoint schedule: `keep` rotates old steps out; `every_seconds` saves by wall time.

Read from the checkpoint folder a run leaves: one numbered folder per kept step.
"""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest

import podrl.envs
from podrl.agents.ppo import PPOConfig
from podrl.anakin import train_anakin
from podrl.anakin.config import AnakinConfig
from podrl.run.checkpoint import Checkpointer
from podrl.run.config import CheckpointConfig, LoggingConfig
from podrl.sebulba import SebulbaConfig, train_sebulba

QUIET = LoggingConfig(run_dir=None, console=False, tensorboard=False)
AGENT = PPOConfig(num_minibatches=2)
UPDATES = 3


def saved_steps(directory: str) -> list[int]:
    """The complete checkpoint steps in `directory` (orbax names each step's folder by its number)."""
    return sorted(int(name) for name in os.listdir(directory) if name.isdigit())


def run(layout: str, directory: str, **checkpoint) -> None:
    """`UPDATES` updates of a tiny run in `layout` that checkpoints into `directory`."""
    settings = CheckpointConfig(directory=directory, **checkpoint)
    if layout == "anakin":  # one update per compiled call: a save can happen after each update
        config = AnakinConfig(env="CartPole-v1", num_envs=4, rollout_length=16, total_steps=4 * 16 * UPDATES,
                              num_devices=1, updates_per_call=1, eval_every=0, eval_episodes=1, logging=QUIET,
                              checkpoint=settings)
        train_anakin(config, AGENT)
    else:
        config = SebulbaConfig(env="jax:MatchSign-v0", envs_per_thread=4, rollout_length=8,
                               total_steps=4 * 8 * UPDATES, actor_devices=(0,), learner_devices=(1,),
                               eval_episodes=0, logging=QUIET, checkpoint=settings)
        train_sebulba(config, AGENT)


@pytest.mark.timeout(300)
def test_keep_rotates_out_all_but_the_newest_steps(tmp_path, cpu_devices):
    directory = str(tmp_path / "ckpt")
    run("anakin", directory, every_updates=1, keep=2)
    assert saved_steps(directory) == [UPDATES - 1, UPDATES]
    checkpointer = Checkpointer(directory, read_only=True)
    try:  # the oldest kept step still restores
        spec = podrl.envs.env_spec(podrl.envs.make("CartPole-v1"))
        keys = jax.random.split(jax.random.key(0), 1)
        like = jax.vmap(lambda k: AGENT.make_agent(spec, 1).init(k, spec).params)(keys)
        params = checkpointer.restore_params(like, UPDATES - 1)
    finally:
        checkpointer.close()
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(params))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("layout", ["anakin", "sebulba"])
def test_every_seconds_saves_by_wall_time(tmp_path, cpu_devices, layout):
    """A 1 ms period is due after every update (each takes longer); an hour's never is before the end."""
    often, never = str(tmp_path / "often"), str(tmp_path / "never")
    run(layout, often, every_seconds=0.001, keep=100)
    run(layout, never, every_seconds=3600.0, keep=100)
    assert saved_steps(often) == list(range(1, UPDATES + 1))
    assert saved_steps(never) == [UPDATES]  # only the final save
