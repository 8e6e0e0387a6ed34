"""`podrl.core.distributed.host_sum` is exact in float64 although JAX runs with 64-bit types off: two fake
processes here (a gather that hands each process's array to JAX as the real one does), and a real
2-process pod in tests/system/test_multihost.py (`test_sebulba_two_processes_share_one_learner`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import multihost_utils

from podrl.core import distributed


@pytest.fixture
def two_processes(monkeypatch):
    """Two processes holding the same values (as Sebulba's hosts hold the same env-step counts): the
    gather turns each one's host array into a JAX array, as `process_allgather` does, and stacks them."""
    assert not jax.config.jax_enable_x64  # the suite's setting, and JAX's default: float64 becomes float32

    def gather(values):
        return np.stack([np.asarray(jnp.asarray(values))] * 2)

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "process_allgather", gather)


def test_counts_past_two_to_the_24_sum_exactly_over_processes(two_processes):
    """2^24 + 1 steps on each of two processes are 2^25 + 2 steps, not float32's 2^25; a fractional
    episode-return sum keeps its float64 digits; the shape is kept."""
    steps = distributed.host_sum(np.array([2 ** 24 + 1]))
    assert steps.dtype == np.float64 and int(steps[0]) == 2 ** 25 + 2
    sums = distributed.host_sum(np.array([[123456789.125, 0.1], [3.0, 2.0 ** 40 + 1]]))
    np.testing.assert_array_equal(sums, 2 * np.array([[123456789.125, 0.1], [3.0, 2.0 ** 40 + 1]]))


def test_one_process_returns_its_values_as_float64():
    out = distributed.host_sum([2 ** 24 + 1, 3])
    assert out.dtype == np.float64 and out.tolist() == [2 ** 24 + 1, 3]


def test_the_words_round_trip_every_float64():
    values = np.array([0.0, -0.0, 1e-300, -2.5e300, np.inf, 2 ** 53 - 1, 0.1])
    words = distributed.float64_words(values)
    assert words.dtype == np.uint32 and words.shape == (14,)
    back = distributed.words_float64(np.stack([words, words]), values.shape)
    np.testing.assert_array_equal(back[1], values)
    assert np.signbit(back[0, 1])
