"""Anakin's greedy evaluation splits its episodes over the learner shards: with 2 shards and
eval_episodes 2, shard d plays ceil(2 / 2) = 1 episode from its own keys (`podrl.core.keys.eval_keys`,
folded with d), and each seed's greedy return is the mean over every shard's episodes. Checked against
the same episodes played on the host with the documented key schedule (not a learning test)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import podrl.envs
from checkpoints import AGENT, tiny_anakin_run
from podrl.anakin import train_anakin
from podrl.core.keys import eval_keys, eval_seed, per_seed_keys
from podrl.run.evaluation import evaluate_greedy


@pytest.mark.timeout(300)
def test_each_learner_shard_plays_its_own_share_of_the_evaluation_episodes(cpu_devices):
    config = tiny_anakin_run(None)  # 2 seeds on 2 learner devices, 3 updates, 2 greedy episodes at the end
    assert config.num_devices == 2 and config.eval_episodes == 2 and config.num_seeds == 2
    result = train_anakin(config, AGENT)
    env = podrl.envs.make("CartPole-v1")
    agent = AGENT.make_agent(podrl.envs.env_spec(env), config.num_updates)
    seed_keys = per_seed_keys(eval_seed(config.seed, config.num_updates), config.num_seeds)
    returns = []
    for i in range(config.num_seeds):
        params = jax.tree.map(lambda x: np.asarray(x)[i], result.state.train_state.params)
        keys = jnp.concatenate([eval_keys(seed_keys[i], shard, 1) for shard in range(2)])  # 1 episode per shard
        returns.append(np.asarray(evaluate_greedy(agent, env, params, keys, config.eval_max_steps).returns))
    returns = np.stack(returns)  # [seed, shard]
    assert (returns[:, 0] != returns[:, 1]).any()  # the shards' episodes differ (another shard's keys would show)
    np.testing.assert_allclose(result.final_eval_return, returns.mean(axis=1), rtol=1e-6)
