"""podrl.agents.returns.gae: hand-computed values, batching, shape checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podrl.agents.returns import batched_gae, gae

GAMMA, LAMBDA = 0.9, 0.8


def _tiny_sequence():
    # t:            0    1     2    3    4
    r_t = [1.0, 2.0, 3.0, 4.0, 5.0]
    discount_t = [1.0, 0.0, 1.0, 1.0, 1.0]  # terminated after t=1
    episode_end_t = [False, True, False, True, False]  # ... and truncated after t=3
    v_tm1 = [0.5, 1.0, 1.5, 2.0, 2.5]
    v_t = [1.0, 9.0, 2.0, 7.0, 3.0]  # 9 is never used (terminal); 7 is V(true final obs)
    return [jnp.asarray(x) for x in (r_t, discount_t, episode_end_t, v_tm1, v_t)]


def test_gae_hand_computed_with_termination_and_truncation():
    # delta = r + 0.9 * d * v' - v = [1.4, 1.0, 3.3, 8.3, 5.2]; gamma * lambda = 0.72
    # A4 = 5.2; A3 = 8.3 (truncated: no recursion, but bootstrapped from 7);
    # A2 = 3.3 + 0.72 * 8.3 = 9.276; A1 = 1.0 (terminated); A0 = 1.4 + 0.72 * 1.0 = 2.12
    advantage, target = gae(*_tiny_sequence(), GAMMA, LAMBDA)
    np.testing.assert_allclose(advantage, [2.12, 1.0, 9.276, 8.3, 5.2], rtol=1e-6)
    np.testing.assert_allclose(target, [2.62, 2.0, 10.776, 10.3, 7.7], rtol=1e-6)


def test_gae_lambda_limits():
    r_t, discount_t, _, v_tm1, v_t = _tiny_sequence()
    no_end = jnp.zeros(5, bool)
    ones = jnp.ones(5)
    adv0, _ = gae(r_t, ones, no_end, v_tm1, v_t, GAMMA, 0.0)
    np.testing.assert_allclose(adv0, r_t + GAMMA * v_t - v_tm1, rtol=1e-6)
    # lambda = 1 with no episode end and V(o_{t+1}) consistent: target is the
    # discounted return bootstrapped from the last v_t.
    v_t_consistent = jnp.concatenate([v_tm1[1:], v_t[-1:]])
    _, target1 = gae(r_t, ones, no_end, v_tm1, v_t_consistent, GAMMA, 1.0)
    expected = [sum(GAMMA**k * float(r_t[t + k]) for k in range(5 - t)) + GAMMA ** (5 - t) * 3.0 for t in range(5)]
    np.testing.assert_allclose(target1, expected, rtol=1e-5)


def test_batched_gae_equals_per_sequence():
    t, b = 7, 3
    keys = jax.random.split(jax.random.key(0), 5)
    r_t, v_tm1, v_t = (jax.random.normal(k, (t, b)) for k in keys[:3])
    discount_t = (jax.random.uniform(keys[3], (t, b)) > 0.3).astype(jnp.float32)
    truncated = jax.random.uniform(keys[4], (t, b)) > 0.8
    episode_end_t = (discount_t == 0) | truncated
    adv, target = jax.jit(batched_gae, static_argnums=(5, 6))(
        r_t, discount_t, episode_end_t, v_tm1, v_t, GAMMA, LAMBDA
    )
    assert adv.shape == target.shape == (t, b)
    for i in range(b):
        a_i, t_i = gae(r_t[:, i], discount_t[:, i], episode_end_t[:, i], v_tm1[:, i], v_t[:, i], GAMMA, LAMBDA)
        np.testing.assert_allclose(adv[:, i], a_i, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(target[:, i], t_i, rtol=1e-6, atol=1e-6)
    assert not np.allclose(adv[:, 0], adv[:, 1])  # columns really differ


def test_gae_rejects_mismatched_shapes():
    r_t, discount_t, episode_end_t, v_tm1, v_t = _tiny_sequence()
    with pytest.raises(AssertionError):
        gae(r_t, discount_t, episode_end_t, v_tm1[:4], v_t, GAMMA, LAMBDA)
    with pytest.raises(AssertionError):  # rank 2 into the single-sequence form
        gae(r_t[:, None], discount_t[:, None], episode_end_t[:, None], v_tm1[:, None], v_t[:, None], GAMMA, LAMBDA)
    with pytest.raises(AssertionError):  # rank 1 into the batched form
        batched_gae(r_t, discount_t, episode_end_t, v_tm1, v_t, GAMMA, LAMBDA)
    with pytest.raises(AssertionError):
        batched_gae(r_t[:, None], discount_t[:, None], episode_end_t[:, None], v_tm1[:, None],
                    jnp.zeros((5, 2)), GAMMA, LAMBDA)
