"""MuZero's value targets bootstrapped from the stored searches (`value_bootstrap="search"`, MuZero's
Appendix G: z_t = u_{t+1} + ... + gamma^n nu_{t+n}, nu the search's root value): step j's bootstrap is
the root value the actor's search found at step j + 1, the target network's value where no such search
is in the window (its last step, a step after which the episode ended); the replay stores the values
only when asked, and an update stores the actors' ones."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from one_device import update_on_one_device
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero.agent import (
    MuZeroParts,
    Step,
    bootstrap_values,
    make_network,
    search_bootstrap,
    stores_search_value,
)
from podrl.core.errors import ConfigError
from podrl.core.types import Trajectory
from podrl.envs.registry import make
from podrl.envs.types import env_spec

SPEC = env_spec(make("MatchCue-v0"))  # observations [4], 4 actions
N, L = 3, 4
SMALL = dict(hidden_sizes=(8,), latent_size=8, dynamics_sizes=(8,), prediction_sizes=(8,), support_size=5,
             unroll_steps=2, td_steps=2, num_simulations=4, batch_size=N)


def windows_with_search_values() -> Step:
    """3 windows of 4 steps: window 0 terminates after step 1, window 1 is truncated after step 2,
    window 2 runs on; search values 10 * window + step + 1, so each says where it came from."""
    discount = np.ones((N, L), np.float32)
    discount[0, 1] = 0.0
    truncated = np.zeros((N, L), bool)
    truncated[1, 2] = True
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.normal(size=(N, L, 4)), jnp.float32)
    search_value = 10.0 * np.arange(N)[:, None] + np.arange(L)[None, :] + 1.0
    return Step(obs, jnp.zeros((N, L), jnp.int32), jnp.zeros((N, L)), jnp.asarray(discount), jnp.asarray(truncated),
                obs + 1.0, jnp.full((N, L, 4), 0.25), jnp.asarray(search_value, jnp.float32))


def numpy_search_bootstrap(windows: Step, network: np.ndarray) -> np.ndarray:
    """The rule written out step by step."""
    want = np.array(network, copy=True)
    ended = (np.asarray(windows.discount) == 0.0) | np.asarray(windows.truncated)
    for i in range(N):
        for j in range(L - 1):
            if not ended[i, j]:
                want[i, j] = np.asarray(windows.search_value)[i, j + 1]
    return want


def test_the_bootstrap_is_the_next_steps_search_value_inside_an_episode_and_the_network_elsewhere():
    windows = windows_with_search_values()
    network = -np.arange(N * L, dtype=np.float32).reshape(N, L) - 100.0
    got = np.asarray(search_bootstrap(windows, jnp.asarray(network)))
    np.testing.assert_array_equal(got, numpy_search_bootstrap(windows, network))
    # by hand: window 0 ends after step 1, window 1 after step 2, the last step of each has no next search
    np.testing.assert_array_equal(got[0], [2.0, network[0, 1], 4.0, network[0, 3]])
    np.testing.assert_array_equal(got[1], [12.0, 13.0, network[1, 2], network[1, 3]])
    np.testing.assert_array_equal(got[2], [22.0, 23.0, 24.0, network[2, 3]])


def test_bootstrap_values_follow_the_config():
    """network: the target network's values of the next observations; search: those values replaced by
    the stored searches where the rule says (a config that ignored the field would fail one of the two)."""
    windows = windows_with_search_values()
    plain_config, search_config = MuZeroConfig(**SMALL), MuZeroConfig(**SMALL, value_bootstrap="search")
    network = make_network(plain_config, SPEC)
    params = network.init(jax.random.key(0), jnp.zeros((1, 4)), jnp.zeros((1,), jnp.int32))
    plain = np.asarray(bootstrap_values(MuZeroParts(plain_config, network, None, None, None, SPEC), params, windows))
    searched = np.asarray(bootstrap_values(MuZeroParts(search_config, network, None, None, None, SPEC), params,
                                           windows))
    assert np.all(np.abs(plain) < 1.0)  # a fresh network's values, nowhere near the stored 2 .. 24
    np.testing.assert_allclose(searched, numpy_search_bootstrap(windows, plain), rtol=1e-6)


def test_the_replay_stores_search_values_only_when_they_bootstrap_and_an_update_stores_the_actors():
    t, b = 8, 4
    common = dict(**{**SMALL, "batch_size": 8}, buffer_size=t * b, min_fill=t * b, replay_ratio=1 / (t * b))
    assert not stores_search_value(MuZeroConfig(**common))
    plain = MuZeroConfig(**common).make_agent(SPEC, 10).init(jax.random.key(0), SPEC)
    assert plain.shard_state.data.search_value is None  # what a run stored before the field existed
    config = MuZeroConfig(**common, value_bootstrap="search")
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    obs = jax.nn.one_hot(jax.random.randint(jax.random.key(1), (t + 1, b), 0, 4), 4)
    ones = jnp.ones((t, b), jnp.float32)
    search_value = jnp.arange(t * b, dtype=jnp.float32).reshape(t, b) + 0.5
    traj = Trajectory(obs[:-1], jnp.zeros((t, b), jnp.int32), ones, ones, jnp.zeros((t, b), bool), obs[1:],
                      {"policy": jnp.full((t, b, 4), 0.25), "search_value": search_value}, ())
    after, metrics = update_on_one_device(agent)(state, traj, jax.random.key(2))
    assert float(metrics["learning"]) == 1.0
    stored = np.asarray(after.shard_state.data.search_value)
    np.testing.assert_array_equal(stored, np.asarray(search_value).reshape(-1))  # time-major, as the steps


def test_an_unknown_value_bootstrap_is_refused_naming_the_field():
    with pytest.raises(ConfigError) as info:
        MuZeroConfig(value_bootstrap="reanalyse")
    assert info.value.field == "value_bootstrap" and "network" in str(info.value) and "search" in str(info.value)
