"""Brax envs in Anakin (`podrl.envs.brax`): spec, a step, termination vs truncation, bad names, a tiny PPO run.

Each jitted Brax program compiles for ~30 s on the 2-core CPU (minutes when it is loaded), so only
the spec / truncation test runs by default; the others are `slow`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dev_extra import require

require("brax.envs", "brax")  # in [dev]: a broken install fails here, never skips

import podrl.envs  # noqa: E402
from podrl.agents.ppo import PPOConfig  # noqa: E402
from podrl.anakin import train_anakin  # noqa: E402
from podrl.anakin.config import AnakinConfig  # noqa: E402
from podrl.envs.brax import BraxEnv  # noqa: E402
from podrl.envs.registry import UnknownEnvError, check_name  # noqa: E402
from podrl.envs.types import LAST, MID  # noqa: E402
from podrl.run.config import LoggingConfig  # noqa: E402

PENDULUM = "brax:inverted_pendulum,episode_length=3"


def rollout(env, actions):
    """`[steps]` timesteps of `env` from reset(key 0), one jitted scan over `actions` `[steps, *act]`."""

    def run(actions):
        state, _ = env.reset(jax.random.key(0))
        return jax.lax.scan(lambda s, a: env.step(s, a), state, actions)[1]

    return jax.device_get(jax.jit(run)(actions))


@pytest.mark.timeout(300)
def test_spec_and_time_limit_truncation_bootstraps():
    """Three steps of balancing: the third is LAST by the time limit, a truncation (discount 1)."""
    env = podrl.envs.make(PENDULUM)
    spec = podrl.envs.env_spec(env)
    assert spec.observation.shape == (4,) and spec.observation.dtype == np.float32
    assert spec.action.shape == (1,) and not spec.discrete
    np.testing.assert_array_equal(spec.action.minimum, [-1.0])
    np.testing.assert_array_equal(spec.action.maximum, [1.0])
    ts = rollout(env, jnp.zeros((3, 1)))
    np.testing.assert_array_equal(ts.step_type, [MID, MID, LAST])
    np.testing.assert_array_equal(ts.discount, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(ts.extras["truncated"], [False, False, True])
    np.testing.assert_array_equal(ts.reward, [1.0, 1.0, 1.0])  # +1 per step alive
    assert np.all(np.isfinite(ts.observation)) and np.abs(ts.observation).max() > 0


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_falling_is_a_termination_and_brax_truncation_info_is_a_truncation():
    """Pushing the cart one way topples the pole: brax's done is our termination (discount 0). A brax
    env under brax's own EpisodeWrapper reports info['truncation'], which stays a truncation."""
    from brax.envs.wrappers.training import EpisodeWrapper

    raw = podrl.envs.make("brax:inverted_pendulum").unwrapped
    ts = rollout(podrl.envs.make("brax:inverted_pendulum,episode_length=200"), jnp.ones((200, 1)))
    end = int(np.argmax(ts.step_type == LAST))
    assert 0 < end < 199 and ts.discount[end] == 0.0 and not ts.extras["truncated"][end]
    assert np.all(ts.discount[:end] == 1.0)
    wrapped = BraxEnv(EpisodeWrapper(raw.env, episode_length=2, action_repeat=1), "brax:inverted_pendulum")
    ts = rollout(wrapped, jnp.zeros((2, 1)))
    np.testing.assert_array_equal(ts.step_type, [MID, LAST])
    np.testing.assert_array_equal(ts.discount, [1.0, 1.0])
    np.testing.assert_array_equal(ts.extras["truncated"], [False, True])


@pytest.mark.parametrize("name, words", [
    ("brax:invertedpendulum", "did you mean"), ("brax:ant,backend=physx", "backend"),
    ("brax:ant,episode_length=0", "episode_length")])
def test_bad_names_are_refused_naming_what_is_wrong(name, words):
    with pytest.raises(UnknownEnvError) as info:
        podrl.envs.make(name) if "episode_length" in name else check_name(name)
    assert words in str(info.value) and info.value.field == "env"


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_tiny_anakin_ppo_run_on_brax_with_normalised_observations(cpu_devices):
    """Two devices, 8 envs x 8 steps, 3 updates: it runs, counts its episodes and its statistics. On brax's
    spring backend, the cheapest to compile (the default backend's physics is the tests above's)."""
    config = AnakinConfig(env="brax:inverted_pendulum,episode_length=20,backend=spring", num_envs=8,
                          rollout_length=8, total_steps=8 * 8 * 3, num_devices=2, updates_per_call=3, eval_every=0,
                          eval_episodes=2, eval_max_steps=20, logging=LoggingConfig(run_dir=None, console=False))
    result = train_anakin(config, PPOConfig(normalize_observations=True, num_minibatches=2))
    record = result.history[-1]
    assert record["updates"] == 3 and float(np.asarray(record["episodes"])[0]) > 0
    stats = jax.tree.map(lambda x: np.asarray(x)[0], result.state.train_state.params["obs_norm"])
    assert float(stats.count) == 3 * 4 * 8  # every observation of a shard (4 envs x 8 steps) per update
    assert 0.0 < float(np.asarray(record["eval_return"])[0]) <= 20.0
