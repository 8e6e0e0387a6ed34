"""The invertible value rescaling h and its inverse, the one home of both (MuZero and R2D2 use them).

    h(x)    = sign(x) (sqrt(|x| + 1) - 1) + eps x
    h^-1(y) = sign(y) (((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1)

Pohlen et al. 2018 ("Observe and Look Further", arXiv:1805.11593, Prop. A.2) with eps = 1e-3,
as MuZero (Schrittwieser et al. 2020, Appendix F) squashes its value and reward targets before their
categorical projection and R2D2 (Kapturowski et al. 2019, sec. 2) its n-step Q targets:
y = h(R + gamma^n h^-1(Q_target)). Elementwise, any shape.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

H_EPSILON = 1e-3
"""The eps of h (Pohlen et al. 2018; MuZero Appendix F; R2D2's hyperparameter table)."""


def value_transform(x: Array, eps: float = H_EPSILON) -> Array:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x, elementwise."""
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + eps * x


def inverse_value_transform(y: Array, eps: float = H_EPSILON) -> Array:
    """h^-1(y) = sign(y) (((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1), elementwise."""
    root = (jnp.sqrt(1.0 + 4.0 * eps * (jnp.abs(y) + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return jnp.sign(y) * (jnp.square(root) - 1.0)
