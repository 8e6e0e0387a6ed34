"""The value rescaling h and h^-1 (podrl.agents.value_rescaling, MuZero's and R2D2's) against the equation."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from podrl.agents.value_rescaling import H_EPSILON, inverse_value_transform, value_transform
from references import numpy_h


def test_value_transform_matches_the_equation_and_its_inverse_undoes_it():
    """h against the equation, h^-1(h(x)) = x (a round trip), h(h^-1(y)) = y."""
    assert H_EPSILON == 1e-3
    xs = [-1234.5, -10.0, -1.0, -0.25, 0.0, 0.3, 1.0, 7.0, 99.0, 5000.0]
    got = np.asarray(value_transform(jnp.asarray(xs, jnp.float32)))
    np.testing.assert_allclose(got, [numpy_h(x) for x in xs], rtol=1e-6, atol=1e-6)
    back = np.asarray(inverse_value_transform(jnp.asarray(got)))
    np.testing.assert_allclose(back, xs, rtol=2e-4, atol=2e-4)
    # the inverse solves h(x) = y for x: check it on y directly too (y = 2: sqrt(|x| + 1) - 1 + eps x = 2)
    x = float(inverse_value_transform(jnp.float32(2.0)))
    assert abs(numpy_h(x) - 2.0) < 1e-4 and 7.9 < x < 8.0  # float32: the inverse divides by 2 eps
    ys = np.linspace(-40.0, 40.0, 81, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(value_transform(inverse_value_transform(jnp.asarray(ys)))), ys, atol=2e-4)
