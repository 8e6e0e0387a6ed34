"""MuZero Reanalyse against a direct search on the same stored observations: the reanalysed share of
a batch takes the policy of a fresh search with the chosen network and value targets bootstrapped
from the target network's search values (at the observation each n-step return stops at, worked
out here by hand); the rest keeps the actors' stored targets. And it runs inside the learner update
as a layout runs it (one device, `shard_map`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from one_device import update_on_one_device
from podrl.agents.muzero import MuZeroConfig
from podrl.agents.muzero.agent import MuZeroParts, Step, batch_from_windows, bootstrap_values, make_network
from podrl.agents.muzero.reanalyse import reanalyse, reanalysed_count
from podrl.agents.muzero.search import search
from podrl.core.errors import ConfigError
from podrl.core.types import Trajectory
from podrl.envs.registry import make
from podrl.envs.types import env_spec

SPEC = env_spec(make("MatchCue-v0"))  # observations [4], 4 actions
N, K, STEPS = 6, 2, 2  # windows, unroll_steps, td_steps: windows of L = 4 steps
GAMMA = 0.9
SMALL = dict(hidden_sizes=(8,), latent_size=8, dynamics_sizes=(8,), prediction_sizes=(8,), support_size=5,
             unroll_steps=K, td_steps=STEPS, gamma=GAMMA, num_simulations=6, batch_size=N)


def random_params(network, seed: int):
    """Params with every leaf drawn at random (the heads' zero kernels too), so each state has its
    own prior, value and reward and no two searches agree by accident."""
    params = network.init(jax.random.key(seed), jnp.zeros((1, 4)), jnp.zeros((1,), jnp.int32))
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(seed + 100), len(leaves))
    return jax.tree.unflatten(tree, [jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)])


def stored_windows() -> Step:
    """N windows of 4 steps with one-hot stored (stale) policies; window 0 terminates after step 0,
    window 1 is truncated after step 1 (a bootstrap from its last observation), the rest run on."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(N, 4, 4)).astype(np.float32)
    next_obs = rng.normal(size=(N, 4, 4)).astype(np.float32)
    discount = np.ones((N, 4), np.float32)
    discount[0, 0] = 0.0
    truncated = np.zeros((N, 4), bool)
    truncated[1, 1] = True
    policy = np.eye(4, dtype=np.float32)[rng.integers(0, 4, size=(N, 4))]
    return Step(jnp.asarray(obs), jnp.asarray(rng.integers(0, 4, size=(N, 4)), jnp.int32),
                jnp.asarray(rng.uniform(-1, 1, size=(N, 4)), jnp.float32), jnp.asarray(discount),
                jnp.asarray(truncated), jnp.asarray(next_obs), jnp.asarray(policy))


# the window step each state k = 0..K bootstraps from (n = 2): window 0 terminated after step 0 (its
# states past the end are absorbing, their weights 0), window 1 truncated after step 1 (states 0 and 1
# stop there), the others at k + n - 1
LAST = {0: [0, 2, 3], 1: [1, 1, 3], 2: [1, 2, 3]}
WEIGHT = {0: [0.0, None, None], 1: [GAMMA ** 2, GAMMA, None], 2: [GAMMA ** 2] * 3}  # None: a state past the end


@pytest.mark.parametrize("network_name", ["online", "target"])
def test_reanalysed_targets_equal_a_direct_search_on_the_stored_observations(network_name):
    """fraction 0.5 of 6 windows: windows 0-2 get the policy of the config's search (Dirichlet noise
    and all, `policy_key`) from their stored observations o_{t+k}, k = 0..K, with the online or the
    target params, and value targets r_t + gamma r_{t+1} + weight v(o'), v the target network's search
    value without noise (`value_key`); windows 3-5 keep the stored one-hot policies and the target
    network's plain values. Keeping any stale target, or searching with the wrong params, fails here."""
    config = MuZeroConfig(**SMALL, search="muzero", reanalyse_fraction=0.5, reanalyse_network=network_name)
    assert reanalysed_count(config) == 3
    network = make_network(config, SPEC)
    parts = MuZeroParts(config, network, None, None, None, SPEC)
    online, target = random_params(network, 1), random_params(network, 2)
    windows = stored_windows()
    key = jax.random.key(7)

    @jax.jit
    def reanalysed_batch(online, target, windows, key):
        fresh, bootstrap = reanalyse(config, network, online, target, windows, bootstrap_values(parts, target, windows),
                                     key)
        return batch_from_windows(parts, target, fresh, bootstrap)

    batch = reanalysed_batch(online, target, windows, key)
    policy_key, value_key = jax.random.split(key)
    searched_params = online if network_name == "online" else target
    direct = search(config, network, searched_params, windows.observation[:3, : K + 1].reshape(-1, 4), policy_key,
                    greedy=False)
    want_policy = np.asarray(direct.action_weights).reshape(3, K + 1, 4)
    got_policy = np.asarray(batch.targets.policy)
    alive = np.asarray([[True, False, False], [True, True, False], [True, True, True]])  # windows 0, 1 end early
    np.testing.assert_allclose(got_policy[:3][alive], want_policy[alive], atol=1e-6)
    np.testing.assert_allclose(got_policy[:3][~alive], 0.25)  # absorbing: uniform
    np.testing.assert_array_equal(got_policy[3:], np.asarray(windows.policy)[3:, : K + 1])  # stored, stale
    assert np.max(np.abs(want_policy[1:3] - np.asarray(windows.policy)[1:3, : K + 1])) > 0.3

    bootstrap_obs = np.stack([np.asarray(windows.next_observation)[i, LAST[i]] for i in range(3)])
    value_search = search(config, network, target, jnp.asarray(bootstrap_obs.reshape(-1, 4)), value_key, greedy=True)
    searched_value = np.asarray(value_search.search_tree.summary().value).reshape(3, K + 1)
    r = np.asarray(windows.reward)
    want_value = np.zeros((3, K + 1))
    for i in range(3):
        for k in range(K + 1):
            if WEIGHT[i][k] is None:
                continue  # past the window's episode end: zero
            steps = range(k, LAST[i][k] + 1)
            want_value[i, k] = sum(GAMMA ** (j - k) * r[i, j] for j in steps) + WEIGHT[i][k] * searched_value[i, k]
    got_value = np.asarray(batch.targets.value)
    np.testing.assert_allclose(got_value[:3], want_value, rtol=1e-5, atol=1e-5)

    plain = np.asarray(bootstrap_values(parts, target, windows))
    assert np.max(np.abs(plain[2, 1:] - searched_value[2])) > 1e-3  # the search moved window 2's values
    want_rest = np.stack([[r[i, k] + GAMMA * r[i, k + 1] + GAMMA ** 2 * plain[i, k + 1] for k in range(K + 1)]
                          for i in range(3, N)])
    np.testing.assert_allclose(got_value[3:], want_rest, rtol=1e-5, atol=1e-5)


def test_reanalyse_fields_are_checked_and_zero_leaves_the_batch_alone():
    for overrides, field in ((dict(reanalyse_fraction=1.5), "reanalyse_fraction"),
                             (dict(reanalyse_network="behaviour"), "reanalyse_network")):
        with pytest.raises(ConfigError) as info:
            MuZeroConfig(**overrides)
        assert info.value.field == field
    config = MuZeroConfig(**SMALL)
    assert reanalysed_count(config) == 0
    windows, bootstrap = stored_windows(), jnp.ones((N, 4))
    same, same_bootstrap = reanalyse(config, None, None, None, windows, bootstrap, jax.random.key(0))
    assert same is windows and same_bootstrap is bootstrap


def root_target_entropy(fraction: float) -> float:
    """One gradient step (one learner shard inside `shard_map`, as the layouts run it) on windows whose
    stored policies are one-hot, `fraction` of them reanalysed: the metric policy_target_entropy (the
    mean entropy of the policy targets at the windows' first states)."""
    t, b = 8, 4
    config = MuZeroConfig(**{**SMALL, "batch_size": 8}, search="gumbel", reanalyse_fraction=fraction,
                          buffer_size=t * b, min_fill=t * b, replay_ratio=1 / (t * b))
    agent = config.make_agent(SPEC, 10)
    state = agent.init(jax.random.key(0), SPEC)
    keys = jax.random.split(jax.random.key(1), 2)
    obs = jax.nn.one_hot(jax.random.randint(keys[0], (t + 1, b), 0, 4), 4)
    ones = jnp.ones((t, b), jnp.float32)
    one_hot_policy = jax.nn.one_hot(jax.random.randint(keys[1], (t, b), 0, 4), 4)
    traj = Trajectory(obs[:-1], jnp.zeros((t, b), jnp.int32), ones, ones, jnp.zeros((t, b), bool), obs[1:],
                      {"policy": one_hot_policy, "search_value": jnp.zeros((t, b))}, ())
    after, metrics = update_on_one_device(agent)(state, traj, jax.random.key(2))
    assert float(metrics["learning"]) == 1.0
    assert max(float(np.max(np.abs(x - y))) for x, y in zip(jax.tree.leaves(state.params),
                                                            jax.tree.leaves(after.params))) > 0
    return float(metrics["policy_target_entropy"])


def test_the_update_reanalyses_inside_the_learner_shard():
    """With every window reanalysed inside the update, the policy targets are the Gumbel searches of the
    untrained model (spread over the actions: entropy 0.73 measured); without, the stored one-hot
    policies (entropy 0)."""
    assert root_target_entropy(1.0) > 0.6
    assert root_target_entropy(0.0) < 1e-6
