"""The driver's tiny runs in both layouts (PPO, CartPole, quiet logging), shared by the driver's tests."""

from __future__ import annotations

from podrl.agents.ppo import PPOConfig
from podrl.anakin.config import AnakinConfig
from podrl.run.config import LoggingConfig
from podrl.sebulba import SebulbaConfig

QUIET = LoggingConfig(run_dir=None, console=False)


AGENT = PPOConfig(num_minibatches=2)


def anakin(**overrides) -> AnakinConfig:
    base = dict(env="MatchSign-v0", num_envs=8, rollout_length=16, total_steps=8 * 16 * 12, num_devices=2,
                updates_per_call=4, eval_every=0, eval_episodes=8, logging=QUIET)
    return AnakinConfig(**{**base, **overrides})


def quick_anakin(**overrides) -> AnakinConfig:
    """MatchSign: PPO learns it in a few updates; small enough for exact-equality tests (all local devices)."""
    base = dict(env="MatchSign-v0", num_envs=8, rollout_length=16, total_steps=8 * 16 * 6,
                updates_per_call=4, eval_every=0, eval_episodes=8, logging=QUIET)
    return AnakinConfig(**{**base, **overrides})


def sebulba(**overrides) -> SebulbaConfig:
    base = dict(env="jax:MatchSign-v0", envs_per_thread=4, rollout_length=8, total_steps=4 * 8 * 8,
                actor_devices=(0,), learner_devices=(1, 2), log_every=2, eval_episodes=4, timeout_s=20.0,
                logging=QUIET)
    return SebulbaConfig(**{**base, **overrides})
