"""podrl.agents.conv: the convolution forward by XLA, its gradient by patches, equal to XLA's own."""

from __future__ import annotations

import functools
import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podrl.agents.conv import Conv, conv2d, conv_by_patches
from podrl.agents.torsos import MinAtarCNN

# (input [N, H, W, C], kernel size, features, stride, padding): the torsos' shapes in small.
CASES = [
    ((2, 11, 13, 3), 3, 5, 1, "VALID"),
    ((2, 11, 13, 3), 3, 5, 1, "SAME"),
    ((2, 12, 12, 4), 4, 6, 2, "VALID"),
    ((2, 11, 10, 2), 3, 4, 2, "SAME"),
    ((1, 20, 20, 4), 8, 3, 4, "VALID"),
]


# The tests run their computations jitted (one compiled program each, shared by the cases of one
# shape) rather than eagerly op by op: eager `conv_by_patches` alone compiles dozens of single ops.
@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _inputs(shape, k, features):
    x = jax.random.normal(jax.random.key(0), shape)
    kernel = jax.random.normal(jax.random.key(1), (k, k, shape[-1], features))
    return x, kernel


def _xla(x, kernel, stride, padding):
    return jax.lax.conv_general_dilated(x, kernel, (stride, stride), padding,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


_jit_conv = functools.partial(jax.jit, static_argnums=(2, 3))


@pytest.mark.parametrize("shape,k,features,stride,padding", CASES)
def test_patches_and_conv2d_equal_xla_convolution(shape, k, features, stride, padding):
    x, kernel = _inputs(shape, k, features)
    want = _jit_conv(_xla)(x, kernel, stride, padding)
    np.testing.assert_allclose(_jit_conv(conv_by_patches)(x, kernel, stride, padding), want, atol=1e-4, rtol=1e-5)
    np.testing.assert_allclose(_jit_conv(conv2d)(x, kernel, stride, padding), want, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("shape,k,features,stride,padding", CASES)
def test_conv2d_gradient_equals_xla_gradient(shape, k, features, stride, padding):
    x, kernel = _inputs(shape, k, features)
    out_shape = jax.eval_shape(lambda x, w: _xla(x, w, stride, padding), x, kernel).shape
    target = jax.jit(lambda: jax.random.normal(jax.random.key(2), out_shape))()

    def loss(conv):
        return lambda x, w: jnp.sum(jnp.tanh(conv(x, w, stride, padding)) * target)

    got = jax.jit(jax.grad(loss(conv2d), argnums=(0, 1)))(x, kernel)
    want = jax.jit(jax.grad(loss(_xla), argnums=(0, 1)))(x, kernel)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-4, rtol=1e-4)


def test_conv2d_under_vmap_and_scan_matches_xla():
    x, kernel = _inputs((3, 2, 4, 9, 9, 2), 3, 4)  # 3 steps (scanned) x 2 members (vmapped) x 4 images

    def sgd(conv):
        def step(w, xb):
            g = jax.vmap(jax.grad(lambda w, xm: jnp.sum(conv(xm, w, 1, "SAME") ** 2)), in_axes=(None, 0))(w, xb)
            return w - 1e-3 * g.sum(0), ()
        return jax.jit(lambda w, xs: jax.lax.scan(step, w, xs)[0])

    np.testing.assert_allclose(sgd(conv2d)(kernel, x), sgd(_xla)(kernel, x), atol=1e-5, rtol=1e-5)


def test_conv_module_has_flax_conv_parameters_and_outputs():
    x = jax.jit(lambda: jax.random.normal(jax.random.key(0), (2, 10, 10, 3)))()
    ours, flax_conv = Conv(8, 3, 2, "SAME"), nn.Conv(8, (3, 3), (2, 2), padding="SAME")
    p_ours, p_flax = jax.jit(ours.init)(jax.random.key(1), x), jax.jit(flax_conv.init)(jax.random.key(1), x)
    assert jax.tree.map(jnp.shape, p_ours) == jax.tree.map(jnp.shape, p_flax)
    np.testing.assert_allclose(jax.jit(ours.apply)(p_flax, x), jax.jit(flax_conv.apply)(p_flax, x), atol=1e-5)


def test_bad_padding_and_kernel_are_refused():
    x, kernel = _inputs((1, 5, 5, 1), 3, 2)
    with pytest.raises(ValueError, match="padding"):
        conv2d(x, kernel, 1, "FULL")
    with pytest.raises(ValueError, match="kernel"):
        conv_by_patches(x, kernel[0], 1, "VALID")


def test_learner_loop_compiles_no_transposed_convolution():
    """The reason for `conv2d`: inside a loop, XLA:CPU leaves the gradient convolutions of
    `lax.conv_general_dilated` in transposed layouts (`f01b_i01o->01bf`) that it runs many times
    slower. An SGD scan over a CNN torso must compile to canonical NHWC convolutions only."""
    torso = MinAtarCNN((10, 10, 4))
    obs = jnp.zeros((3, 8, 10, 10, 4), jnp.bool_)  # 3 minibatches of 8 observations
    params = jax.jit(torso.init)(jax.random.key(0), obs[0])

    def step(p, xb):
        g = jax.grad(lambda p: jnp.sum(torso.apply(p, xb) ** 2))(p)
        return jax.tree.map(lambda a, b: a - 1e-3 * b, p, g), ()

    text = jax.jit(lambda p, xs: jax.lax.scan(step, p, xs)[0]).lower(params, obs).compile().as_text()
    labels = re.findall(r" convolution\(.*?dim_labels=([\w>-]+)", text)
    assert set(labels) <= {"b01f_01io->b01f"}, labels  # on CPU the differentiated forward is patches too
    assert " dot(" in text, "the patches' matrix products should be in the program"
    # without a gradient (an actor's inference) the torso is XLA's own canonical convolution
    acting = jax.jit(torso.apply).lower(params, obs[0]).compile().as_text()
    assert set(re.findall(r" convolution\(.*?dim_labels=([\w>-]+)", acting)) == {"b01f_01io->b01f"}
