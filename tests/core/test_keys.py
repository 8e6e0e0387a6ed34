"""podrl.core.keys: the one key tree both layouts draw from."""

from __future__ import annotations

import jax
import numpy as np

from podrl.core import keys
from podrl.envs.adapters.jax_host import anakin_env_keys


def _data(key) -> np.ndarray:
    return np.asarray(jax.random.key_data(key))


def test_seed_split_is_the_documented_tree():
    tree = keys.seed_keys(7)
    params, env, run = jax.random.split(jax.random.key(7), 3)
    for got, expected in zip(tree, (params, env, run)):
        np.testing.assert_array_equal(_data(got), _data(expected))
    rollout, update = keys.update_keys(keys.base_key(tree.run, 2), 5)
    expected = jax.random.split(jax.random.fold_in(jax.random.fold_in(run, 2), 5))
    np.testing.assert_array_equal(_data(rollout), _data(expected[0]))
    np.testing.assert_array_equal(_data(update), _data(expected[1]))


def test_seed_keys_under_vmap_equal_python_ints():
    traced = jax.vmap(lambda s: keys.seed_keys(s).run)(np.arange(3, dtype=np.uint32) + np.uint32(4))
    for i in range(3):
        np.testing.assert_array_equal(_data(traced[i]), _data(keys.seed_keys(4 + i).run))


def test_jax_host_env_keys_match_the_env_branch():
    np.testing.assert_array_equal(_data(anakin_env_keys(3, 8)), _data(keys.env_keys(keys.seed_keys(3).env, 8)))


def test_host_seeds_differ_per_index_and_are_stable():
    seeds = [keys.host_env_seed(0, i) for i in range(4)]
    assert len(set(seeds)) == 4 and all(0 <= s < 2**31 for s in seeds)
    assert keys.host_env_seed(0, 1) == keys.host_env_seed(0, 1)
    assert keys.eval_seed(5, 10) == 5 + keys.EVAL_SEED_OFFSET + 10
