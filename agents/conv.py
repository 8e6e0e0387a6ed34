"""2-D convolution whose gradient is computed as patches and matrix products.

XLA:CPU (jaxlib 0.10.2) runs the two convolutions of a convolution's gradient (with respect to
its input and to its kernel) many times slower when they sit inside a `while` loop, which is
exactly where every learner computes them: the epoch and minibatch `lax.scan`s of PPO, IMPALA
and PQN. `python -m benchmarks.conv_grad --steps 8 --repeats 2` on this project's 2-core CPU
machine (2026-12-01, a loaded machine), ms per SGD step with `flax.linen.Conv`, inside a scan vs
the same steps unrolled:

- Nature CNN, 64 frames `[4, 84, 84]`: 2,459 ms in the scan vs 97 ms unrolled;
- MinAtar CNN, 512 observations `[10, 10, 4]`: 124 ms vs 11 ms.

In the compiled HLO the forward convolutions are canonical (`b01f_01io->b01f`) in both, while
inside the loop the gradient ones keep JAX's transposed dimension labels (`f01b_i01o->01bf`,
`b01f_01oi->b01f`) and run through a naive loop emitter. `conv2d` keeps XLA's convolution where
nothing differentiates it (an actor's inference) and, on CPU, differentiates an equivalent
formulation instead: the `kh * kw` strided slices of the input concatenated into patches
`[N, Ho, Wo, kh * kw * C]`, times the kernel reshaped to `[kh * kw * C, O]`. Under a gradient the
forward output is those patches' product too, so XLA builds the patches once for both passes; the
gradient is two matrix products and the slices' transposes (pads and adds), which XLA runs at full
speed in or out of a loop. The values are the same convolution (to float32 rounding; tested).
On GPU and TPU, where XLA's convolutions and their gradients are library calls, both passes are
XLA's own (`lax.platform_dependent`, resolved when the program is lowered).
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

Array = jax.Array

_DIMENSIONS = ("NHWC", "HWIO", "NHWC")
PADDINGS = ("VALID", "SAME")


def _check(kernel: Array, stride: int, padding: str) -> None:
    if kernel.ndim != 4:
        raise ValueError(f"kernel: expected [kh, kw, C, O], got shape {kernel.shape}")
    if padding not in PADDINGS:
        raise ValueError(f"padding: expected one of {PADDINGS}, got {padding!r}")
    if stride < 1:
        raise ValueError(f"stride: expected a positive int, got {stride}")


def conv_by_patches(x: Array, kernel: Array, stride: int = 1, padding: str = "VALID") -> Array:
    """The convolution `x [N, H, W, C]` * `kernel [kh, kw, C, O]` -> `[N, Ho, Wo, O]` as patches
    `[N, Ho, Wo, kh * kw * C]` (the strided slices of `x`, kernel row by row) times the kernel
    reshaped to `[kh * kw * C, O]`; the same values as `lax.conv_general_dilated` (NHWC, HWIO)."""
    _check(kernel, stride, padding)
    kh, kw, c, o = kernel.shape
    pads = jax.lax.padtype_to_pads(x.shape[1:3], (kh, kw), (stride, stride), padding)  # XLA's own "SAME"
    x = jnp.pad(x, ((0, 0), *pads, (0, 0)))
    n, h, w, _ = x.shape
    ho, wo = (h - kh) // stride + 1, (w - kw) // stride + 1
    slices = [x[:, i: i + (ho - 1) * stride + 1: stride, j: j + (wo - 1) * stride + 1: stride, :]
              for i in range(kh) for j in range(kw)]
    patches = jnp.concatenate(slices, axis=-1).reshape(n * ho * wo, kh * kw * c)
    return (patches @ kernel.reshape(kh * kw * c, o)).reshape(n, ho, wo, o)


def _xla_conv(x: Array, kernel: Array, stride: int, padding: str) -> Array:
    return jax.lax.conv_general_dilated(x, kernel, (stride, stride), padding, dimension_numbers=_DIMENSIONS)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def conv2d(x: Array, kernel: Array, stride: int = 1, padding: str = "VALID") -> Array:
    """`x [N, H, W, C]` * `kernel [kh, kw, C, O]` -> `[N, Ho, Wo, O]` (square `stride`, "VALID" or
    "SAME" `padding`): XLA's convolution when not differentiated; under a gradient, on CPU,
    `conv_by_patches` forward and backward, on other platforms XLA's for both."""
    _check(kernel, stride, padding)
    return _xla_conv(x, kernel, stride, padding)


def _conv2d_fwd(x: Array, kernel: Array, stride: int, padding: str):
    """The output as patches on CPU (the backward pass builds the same patches, and XLA computes them
    once), XLA's convolution elsewhere; residuals `(x, kernel)`."""
    out = jax.lax.platform_dependent(x, kernel,
                                     cpu=functools.partial(conv_by_patches, stride=stride, padding=padding),
                                     default=functools.partial(_xla_conv, stride=stride, padding=padding))
    return out, (x, kernel)


def _vjp_by(conv: Callable[..., Array], stride: int, padding: str) -> Callable[..., tuple[Array, Array]]:
    def vjp(x: Array, kernel: Array, cotangent: Array) -> tuple[Array, Array]:
        return jax.vjp(functools.partial(conv, stride=stride, padding=padding), x, kernel)[1](cotangent)
    return vjp


def _conv2d_bwd(stride: int, padding: str, residuals, cotangent: Array):
    """On CPU the patches' gradient; on other platforms (cuDNN, TPU) XLA's own, which is fast there."""
    x, kernel = residuals
    return jax.lax.platform_dependent(x, kernel, cotangent, cpu=_vjp_by(conv_by_patches, stride, padding),
                                      default=_vjp_by(_xla_conv, stride, padding))


conv2d.defvjp(_conv2d_fwd, _conv2d_bwd)


class Conv(nn.Module):
    """A square-kernel 2-D convolution layer with bias on NHWC inputs, by `conv2d`.

    Its parameters are `flax.linen.Conv`'s ("kernel" `[k, k, C, features]`, "bias" `[features]`)
    and so are its auto-names (`Conv_0`, ...), so parameter trees and checkpoints are unchanged.
    """

    features: int
    kernel_size: int
    stride: int = 1
    padding: str = "VALID"
    kernel_init: Callable = nn.initializers.orthogonal(math.sqrt(2.0))
    bias_init: Callable = nn.initializers.zeros

    @nn.compact
    def __call__(self, x: Array) -> Array:
        k = self.kernel_size
        kernel = self.param("kernel", self.kernel_init, (k, k, x.shape[-1], self.features), jnp.float32)
        bias = self.param("bias", self.bias_init, (self.features,), jnp.float32)
        return conv2d(x, kernel, self.stride, self.padding) + bias
