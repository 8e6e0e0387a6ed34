"""The sum tree (podrl.agents.sum_tree) against a NumPy transcription, and its sampling frequencies against
its leaves by a chi-square test that a uniform sampler fails."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from podrl.agents import sum_tree
from references import ALPHA_TEST, chi_square_p

DRAWS = 200_000


def numpy_nodes(leaf_values: np.ndarray, capacity: int) -> np.ndarray:
    """The heap of sums `[2L]` a sum tree of these leaves must hold: node 1 the total, node i = 2i + 2i+1."""
    nodes = np.zeros(2 * capacity, np.float64)
    nodes[capacity:capacity + len(leaf_values)] = leaf_values
    for i in range(capacity - 1, 0, -1):
        nodes[i] = nodes[2 * i] + nodes[2 * i + 1]
    return nodes


def test_sampling_frequencies_match_the_leaves_and_a_uniform_sampler_fails():
    """13 leaves (3 of them 0) in a 16-slot tree; 200k draws (seed 0): chi-square p > 1e-3 against
    value_i / total. The same test rejects uniform draws over the positive leaves (the mutation it guards)."""
    rng = np.random.default_rng(0)
    values = rng.uniform(0.05, 1.0, size=13).astype(np.float32)
    values[[2, 7, 12]] = 0.0
    tree = sum_tree.update(sum_tree.init(13), jnp.arange(13), jnp.asarray(values))
    drawn = np.asarray(jax.jit(sum_tree.sample, static_argnums=2)(tree, jax.random.key(0), DRAWS))
    counts = np.bincount(drawn, minlength=16)
    assert counts[13:].sum() == 0 and counts[[2, 7, 12]].sum() == 0  # padding and zero leaves never drawn
    assert chi_square_p(counts[:13], values) > ALPHA_TEST
    uniform = np.asarray(jax.random.choice(jax.random.key(0), np.flatnonzero(values), (DRAWS,)))
    assert chi_square_p(np.bincount(uniform, minlength=13), values) < 1e-12


def test_updates_match_a_numpy_transcription():
    """Batched updates (duplicates included: the larger value wins) keep every node the sum of its children,
    exactly as NumPy recomputes them; `probability` is value / total and `find` lays the leaves end to end."""
    rng = np.random.default_rng(1)
    n = 37
    tree, leaves = sum_tree.init(n), np.zeros(n)
    assert tree.capacity == 64 and tree.depth == 6
    update = jax.jit(sum_tree.update)
    for _ in range(20):
        index = rng.integers(0, n, size=9)
        index[1] = index[0]  # a duplicate in every batch
        value = rng.uniform(0.0, 3.0, size=9).astype(np.float32)
        tree = update(tree, jnp.asarray(index), jnp.asarray(value))
        for i in np.unique(index):
            leaves[i] = value[index == i].max()
    np.testing.assert_allclose(np.asarray(tree.nodes), numpy_nodes(leaves.astype(np.float32), 64), rtol=1e-5)
    assert float(sum_tree.total(tree)) == float(np.asarray(tree.nodes)[1])
    probe = np.array([0, 5, 17, 36])
    np.testing.assert_allclose(np.asarray(sum_tree.probability(tree, jnp.asarray(probe))),
                               leaves[probe] / leaves.sum(), rtol=1e-5)
    edges = np.concatenate([[0.0], np.cumsum(leaves)])
    masses = (edges[:-1] + edges[1:]) / 2  # the middle of each leaf's stretch
    positive = leaves > 0
    found = np.asarray(sum_tree.find(tree, jnp.asarray(masses[positive], jnp.float32)))
    np.testing.assert_array_equal(found, np.flatnonzero(positive))


def test_a_draw_at_the_top_of_the_range_never_lands_on_an_empty_leaf():
    """Mass at (or, by float rounding, past) the total lands on the last positive leaf, never on the
    zero leaves after it; an all-zero tree gives leaf 0."""
    tree = sum_tree.update(sum_tree.init(8), jnp.arange(8), jnp.asarray([1.0, 2.0, 0.5, 0, 0, 0, 0, 0]))
    total = float(sum_tree.total(tree))
    found = np.asarray(sum_tree.find(tree, jnp.asarray([total, total * 1.0001, 0.0, 2.999], jnp.float32)))
    np.testing.assert_array_equal(found, [2, 2, 0, 1])
    assert int(sum_tree.sample(sum_tree.init(8), jax.random.key(0), 4)[0]) == 0
