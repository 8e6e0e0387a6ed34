"""podrl.agents.returns.vtrace against the paper's definition (NumPy loops), batching, shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podrl.agents.returns import batched_vtrace, vtrace
from references import numpy_vtrace

GAMMA = 0.9
CLIPS = dict(clip_rho_threshold=1.2, clip_pg_rho_threshold=1.5, clip_c_threshold=0.9)


def _sequence():
    # t:          0     1     2     3
    v_tm1 = [1.0, 2.0, 3.0, 4.0]
    v_t = [2.0, 9.0, 4.0, 6.0]  # 9 = V(terminal obs), never used
    r = [1.0, 2.0, 3.0, 4.0]
    discount = [GAMMA, 0.0, GAMMA, GAMMA]  # terminated after t=1
    end = [False, True, False, False]
    rho = [0.5, 2.0, 1.1, 1.3]  # rho clip (1.2) binds at 1, 3; c clip (0.9) at 1, 2, 3; pg clip (1.5) at 1
    return [jnp.asarray(x) for x in (v_tm1, v_t, r, discount, end, rho)]


def test_vtrace_hand_computed_with_clipping_and_termination():
    args = _sequence()
    vs, pg = vtrace(*args, lambda_=1.0, **CLIPS)
    expected_vs, expected_pg = numpy_vtrace(*args, lambda_=1.0, **CLIPS)
    # By hand, rho_c = [.5, 1.2, 1.1, 1.2], c = [.5, .9, .9, .9]:
    # delta = rho_c * (r + d V' - V) = [.5*1.8, 1.2*0, 1.1*3.6, 1.2*5.4] = [.9, 0, 3.96, 6.48]
    # v3 = 4 + 6.48 = 10.48; v2 = 3 + 3.96 + .9*.9*6.48 = 12.2088; v1 = 2 + 0 (termination cuts)
    # v0 = 1 + .9 + .9*.5*0 = 1.9
    np.testing.assert_allclose(expected_vs, [1.9, 2.0, 12.2088, 10.48], rtol=1e-6)
    # pg: A0 = .5 (1 + .9*2 - 1) = .9; A1 = 1.5 (2 - 2) = 0; A2 = 1.1 (3 + .9*10.48 - 3);
    # A3 = 1.3 (4 + .9*6 - 4)
    np.testing.assert_allclose(expected_pg, [0.9, 0.0, 1.1 * 0.9 * 10.48, 1.3 * 5.4], rtol=1e-6)
    np.testing.assert_allclose(vs, expected_vs, rtol=1e-6)
    np.testing.assert_allclose(pg, expected_pg, rtol=1e-6, atol=1e-6)


def test_vtrace_truncation_bootstraps_and_cuts_the_trace():
    v_tm1, v_t, r, _, _, rho = _sequence()
    discount = jnp.full(4, GAMMA)  # no termination ...
    end = jnp.array([False, True, False, False])  # ... but a time-limit cut after t=1
    vs, pg = vtrace(v_tm1, v_t, r, discount, end, rho, lambda_=0.8, **CLIPS)
    expected_vs, expected_pg = numpy_vtrace(v_tm1, v_t, r, discount, end, rho, 0.8, **CLIPS)
    np.testing.assert_allclose(vs, expected_vs, rtol=1e-6)
    np.testing.assert_allclose(pg, expected_pg, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(vs[1], 2.0 + 1.2 * (2.0 + GAMMA * 9.0 - 2.0), rtol=1e-6)  # from V(final obs)


def test_on_policy_vtrace_is_the_n_step_return():
    """rho = 1, no clipping, lambda = 1, no episode end: v_s = sum_k gamma^k r_{s+k} + gamma^{T-s} V(x_T)."""
    t = 6
    keys = jax.random.split(jax.random.key(0), 3)
    v_tm1 = jax.random.normal(keys[0], (t,))
    bootstrap = 2.5
    v_t = jnp.concatenate([v_tm1[1:], jnp.array([bootstrap])])
    r = jax.random.normal(keys[1], (t,))
    vs, pg = vtrace(v_tm1, v_t, r, jnp.full(t, GAMMA), jnp.zeros(t, bool), jnp.ones(t), lambda_=1.0)
    r64 = np.asarray(r, np.float64)
    expected = [sum(GAMMA**k * r64[s + k] for k in range(t - s)) + GAMMA ** (t - s) * bootstrap for s in range(t)]
    np.testing.assert_allclose(vs, expected, rtol=1e-5)
    q = np.append(np.asarray(vs)[1:], bootstrap)
    np.testing.assert_allclose(pg, r64 + GAMMA * q - np.asarray(v_tm1), rtol=1e-5, atol=1e-6)


def test_batched_vtrace_equals_per_sequence_and_numpy():
    t, b = 7, 3
    keys = jax.random.split(jax.random.key(1), 6)
    v_tm1, v_t, r = (jax.random.normal(k, (t, b)) for k in keys[:3])
    terminated = jax.random.uniform(keys[3], (t, b)) < 0.2
    end = terminated | (jax.random.uniform(keys[4], (t, b)) < 0.1)
    discount = GAMMA * (~terminated).astype(jnp.float32)
    rho = jnp.exp(0.7 * jax.random.normal(keys[5], (t, b)))
    vs, pg = jax.jit(batched_vtrace, static_argnums=(6, 7, 8, 9))(
        v_tm1, v_t, r, discount, end, rho, 0.95, 1.2, 1.5, 0.9)
    assert vs.shape == pg.shape == (t, b)
    for i in range(b):
        column = [x[:, i] for x in (v_tm1, v_t, r, discount, end, rho)]
        vs_i, pg_i = vtrace(*column, lambda_=0.95, **CLIPS)
        np.testing.assert_allclose(vs[:, i], vs_i, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(pg[:, i], pg_i, rtol=1e-6, atol=1e-6)
        expected_vs, expected_pg = numpy_vtrace(*column, lambda_=0.95, **CLIPS)
        np.testing.assert_allclose(vs[:, i], expected_vs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(pg[:, i], expected_pg, rtol=1e-5, atol=1e-5)
    assert not np.allclose(vs[:, 0], vs[:, 1])


def test_vtrace_rejects_bad_shapes():
    v_tm1, v_t, r, discount, end, rho = _sequence()
    with pytest.raises(AssertionError):
        vtrace(v_tm1, v_t[:3], r, discount, end, rho)
    with pytest.raises(AssertionError):  # rank 2 into the single-sequence form
        vtrace(*(x[:, None] for x in (v_tm1, v_t, r, discount, end, rho)))
    with pytest.raises(AssertionError):  # rank 1 into the batched form
        batched_vtrace(v_tm1, v_t, r, discount, end, rho)
    with pytest.raises(AssertionError):
        batched_vtrace(*(x[:, None] for x in (v_tm1, v_t, r, discount, end)), jnp.ones((4, 2)))
