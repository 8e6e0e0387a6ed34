"""Targets computed from params the update chooses, with the online and target networks set apart by hand
(their Q heads constant and different): R2D2's n-step double-Q targets bootstrap from the target network
at the action the online network picks (Kapturowski et al. 2019, sec. 2; van Hasselt et al. 2016), or from
the target network's max without double Q; against a NumPy transcription. DQN's, MuZero's, SAC's, TD3's,
IMPALA's and PPO's own choices are in their update tests (test_dqn.py, test_muzero_update.py,
test_continuous_update.py, test_impala.py, test_ppo_update.py); prioritised DQN's in
test_importance_weights.py."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from hand_replay import (
    R2D2,
    R2D2_SPEC,
    B,
    constant_heads,
    drawn_windows,
    numpy_r2d2_targets,
    r2d2_replay,
    r2d2_steps,
    replace,
)
from podrl.agents.r2d2 import agent as r2d2_agent
from podrl.agents.r2d2 import losses as r2d2_losses

ONLINE, TARGET = np.array([1.0, 2.0]), np.array([3.0, -1.0])
"""Q_online argmax 1, Q_target argmax 0: double Q bootstraps -1, the max 3; the online network's values
would give 2 (its max) or 1 (at the target's argmax)."""


@pytest.mark.parametrize("double_q, truncations, rescaling", [(True, True, True), (False, True, True),
                                                             (True, False, True), (True, True, False)])
def test_r2d2_targets_bootstrap_from_the_target_network_at_the_action_the_online_one_picks(double_q, truncations,
                                                                                         rescaling):
    """With truncations in the batch the target network runs on every next observation; without, its
    unroll's next step gives Q_target(o'_t): both must be the target network's. With value rescaling
    y = h(R + w h^-1(Q)), without it y = R + w Q."""
    config = replace(R2D2, double_q=double_q, value_rescaling=rescaling)
    parts = r2d2_agent.make_parts(config, R2D2_SPEC, 10)
    steps = r2d2_steps(0, truncations)
    replay, _ = r2d2_replay(config, steps, 1)
    init = r2d2_agent._init(parts, jax.random.key(0), R2D2_SPEC).params
    online, target = constant_heads(init, ONLINE), constant_heads(jax.tree.map(lambda x: -x, init), TARGET)
    batch = jax.jit(functools.partial(r2d2_agent._batch, parts, B))(replay, jax.random.key(2), online, target)
    q_taken, y = jax.jit(functools.partial(r2d2_losses.learned_q_and_targets, config, parts.network))(online, batch)
    start, column = drawn_windows(config, np.asarray(batch.index))
    bootstrap = TARGET[np.argmax(ONLINE)] if double_q else TARGET.max()
    want = np.stack([numpy_r2d2_targets(config, steps, s, c, bootstrap) for s, c in zip(start, column)])
    assert len(set(zip(start, column))) > 8  # many sequences drawn
    ended = [steps.discount[s + config.burn_in:s + config.window, c] == 0 for s, c in zip(start, column)]
    assert np.any(ended) and not np.all(np.concatenate(ended))  # terminations cut some returns, not all
    np.testing.assert_allclose(np.asarray(y).T, want, atol=2e-4)  # float32 h^-1 divides by 2 eps
    actions = np.stack([steps.action[s + config.burn_in:s + config.window, c] for s, c in zip(start, column)])
    np.testing.assert_allclose(np.asarray(q_taken).T, ONLINE[actions], rtol=1e-6)
