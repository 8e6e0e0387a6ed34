"""Tiny Anakin runs that checkpoint (their configs, logging and the leaves of a restored state), shared by the
checkpoint, resume and failure tests."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from podrl.anakin.config import AnakinConfig
from podrl.run.config import CheckpointConfig, LoggingConfig
from tiny_runs import AGENT  # noqa: F401 (the same PPO as the driver's tests: one compile per session)


def logs(tmp_path: Path, name: str) -> LoggingConfig:
    return LoggingConfig(run_dir=str(tmp_path), run_name=name, console=False, tensorboard=False)


def anakin(tmp_path: Path, name: str, **checkpoint) -> AnakinConfig:
    return AnakinConfig(env="CartPole-v1", num_envs=8, rollout_length=16, total_steps=8 * 16 * 10,
                        num_devices=2, updates_per_call=3, eval_every=0, eval_episodes=4,
                        logging=logs(tmp_path, name), checkpoint=CheckpointConfig(**checkpoint))


def leaves(tree) -> list[np.ndarray]:
    def raw(x):
        return jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x

    return [np.asarray(raw(x)) for x in jax.tree.leaves(tree)]


def tiny_anakin_run(run_dir: str | None) -> AnakinConfig:
    """The run test_evaluate.py trains too (keep them identical: one compile per test session)."""
    return AnakinConfig(env="CartPole-v1", num_seeds=2, num_envs=8, rollout_length=16, total_steps=8 * 16 * 3,
                        num_devices=2, updates_per_call=2, eval_every=0, eval_episodes=2,
                        logging=LoggingConfig(run_dir=run_dir, run_name="r", console=False, tensorboard=False))
