"""The prioritised sequence replay (podrl.agents.prioritised) against a NumPy model: which sequences are
drawable after each add (wrapping round the ring), their priorities, the windows and start states a draw
returns, sampling by p^alpha, importance weights and R2D2's sequence priority."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from podrl.agents import prioritised
from references import ALPHA_TEST, chi_square_p

B, T, PERIOD, WINDOW, ROWS = 3, 4, 2, 5, 10
"""3 envs, rollouts of 4 steps, a sequence of 5 steps every 2 steps of each env, 10 steps per env stored."""
ALPHA = 0.9


def rollout_items(first_step: int) -> prioritised.SequenceItems:
    """Steps `first_step .. first_step + T - 1` of each env: the observation names (step g, env b) as
    g * 10 + b, and so does the start state of the sequences starting at even steps."""
    g = first_step + np.arange(T)[:, None]
    code = (g * 10 + np.arange(B)[None, :]).astype(np.float32)  # [T, B]
    return prioritised.SequenceItems({"obs": jnp.asarray(code)}, {"state": jnp.asarray(code[::PERIOD])})


def expected_drawable(total_steps: int) -> set[tuple[int, int]]:
    """(start step g, env b) of the sequences stored whole, oldest to newest, after `total_steps` steps of each env."""
    oldest = max(0, total_steps - ROWS)
    return {(g, b) for g in range(0, total_steps, PERIOD) for b in range(B)
            if g >= oldest and g + WINDOW <= total_steps}


def leaf_of(g: int, b: int) -> int:
    return ((g % ROWS) // PERIOD) * B + b


def test_sequences_are_drawable_exactly_while_stored_whole_and_keep_their_priorities():
    """Seven 4-step rollouts into a ring of 10 steps per env (wrapping three times): after every add the
    positive leaves are exactly the sequences stored whole in write order; a sequence the add completes
    gets the largest priority set so far (^alpha), one that stays keeps the priority set for it, one whose
    steps were overwritten gets 0 (a NumPy model of the leaves by (start step, env))."""
    replay = prioritised.init(ROWS * B, {"obs": jax.ShapeDtypeStruct((), jnp.float32)}, PERIOD,
                              {"state": jax.ShapeDtypeStruct((), jnp.float32)})
    add = jax.jit(lambda r, items: prioritised.add(r, items, WINDOW, PERIOD, ALPHA))
    set_priorities = jax.jit(lambda p, i, v: prioritised.set_priorities(p, i, v, ALPHA))
    rng = np.random.default_rng(0)
    model, max_priority, before = {}, 1.0, set()
    for k in range(7):
        replay = add(replay, rollout_items(k * T))
        now = expected_drawable((k + 1) * T)
        model = {key: model[key] if key in before else max_priority ** ALPHA for key in now}
        leaves = np.asarray(replay.priorities.tree.nodes)[replay.priorities.tree.capacity:]
        want = np.zeros_like(leaves)
        for (g, b), value in model.items():
            want[leaf_of(g, b)] = value
        np.testing.assert_allclose(leaves, want, rtol=1e-6, err_msg=f"after add {k}")
        assert int(replay.size) == min((k + 1) * T, ROWS) * B
        chosen = sorted(now)[:: 2]  # new priorities for half of the drawable sequences
        if chosen:
            values = rng.uniform(0.1, 3.0, size=len(chosen)).astype(np.float32)
            index = jnp.asarray([leaf_of(g, b) for g, b in chosen])
            replay = replay._replace(priorities=set_priorities(replay.priorities, index, jnp.asarray(values)))
            model.update({key: float(v) ** ALPHA for key, v in zip(chosen, values)})
            max_priority = max(max_priority, float(values.max()))
        before = now
    assert float(replay.priorities.max_priority) == pytest.approx(max_priority)


def test_a_draw_returns_its_sequence_and_stored_state_and_draws_follow_p_to_the_alpha():
    """After 5 rollouts (the ring wrapped): every drawn window is WINDOW consecutive steps of one env from
    the drawn sequence's start, with the start state stored for it, and `probability` is p^alpha / sum;
    200k draws (seed 1) pass the chi-square test against p^alpha (a uniform draw over the drawable
    sequences would not: test_sum_tree)."""
    replay = prioritised.init(ROWS * B, {"obs": jax.ShapeDtypeStruct((), jnp.float32)}, PERIOD,
                              {"state": jax.ShapeDtypeStruct((), jnp.float32)})
    for k in range(5):
        replay = prioritised.add(replay, rollout_items(k * T), WINDOW, PERIOD, ALPHA)
    drawable = sorted(expected_drawable(5 * T))
    index = jnp.asarray([leaf_of(g, b) for g, b in drawable])
    priority = np.random.default_rng(2).uniform(0.1, 2.0, size=len(drawable)).astype(np.float32)
    priorities = prioritised.set_priorities(replay.priorities, index, jnp.asarray(priority), ALPHA)
    replay = replay._replace(priorities=priorities)
    drawn = jax.jit(prioritised.sample, static_argnums=(2, 3, 4, 5))(replay, jax.random.key(1), 200_000, WINDOW,
                                                                     PERIOD, B)
    obs, state = np.asarray(drawn.window["obs"]), np.asarray(drawn.start_state["state"])
    g, b = obs[:, 0] // 10, obs[:, 0] % 10
    np.testing.assert_array_equal(obs, (g[:, None] + np.arange(WINDOW)[None, :]) * 10 + b[:, None])
    np.testing.assert_array_equal(state, obs[:, 0])
    np.testing.assert_array_equal(np.asarray(drawn.index), ((g.astype(int) % ROWS) // PERIOD) * B + b.astype(int))
    weights = priority ** ALPHA
    probability = dict(zip([leaf_of(*key) for key in drawable], weights / weights.sum()))
    np.testing.assert_allclose(np.asarray(drawn.probability)[:100],
                               [probability[int(i)] for i in np.asarray(drawn.index)[:100]], rtol=1e-5)
    counts = np.bincount([drawable.index((int(x), int(y))) for x, y in zip(g, b)], minlength=len(drawable))
    assert chi_square_p(counts, weights) > ALPHA_TEST


def numpy_importance_weights(probability: np.ndarray, beta: float, n: int) -> np.ndarray:
    """Schaul et al. 2016, sec. 3.4: w_i = (N P(i))^-beta, divided by the batch's largest."""
    w = (n * probability) ** -beta
    return w / w.max()


def test_importance_weights_and_sequence_priorities_match_numpy():
    """Importance weights against (N P)^-beta / max (N cancels); weights without beta (beta = 1, or none)
    are far from them, so this test catches that mutation. R2D2's sequence priority is
    eta max |delta| + (1 - eta) mean |delta|."""
    probability = np.array([0.02, 0.1, 0.005, 0.3, 0.07], np.float32)
    got = np.asarray(prioritised.importance_weights(jnp.asarray(probability), 0.6))
    want = numpy_importance_weights(probability, 0.6, 1000)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert np.abs(numpy_importance_weights(probability, 1.0, 1000) - want).max() > 0.1
    assert np.abs(np.ones_like(want) - want).max() > 0.1
    td = np.random.default_rng(3).normal(size=(4, 7)).astype(np.float32)
    got = np.asarray(prioritised.sequence_priority(jnp.abs(jnp.asarray(td)), 0.9))
    np.testing.assert_allclose(got, 0.9 * np.abs(td).max(1) + 0.1 * np.abs(td).mean(1), rtol=1e-6)


def test_layouts_that_cannot_hold_sequences_are_explained():
    """The period must divide the rollout, the ring be whole rows of period x envs and hold a rollout plus a
    sequence of each env; `add` refuses such a rollout with that sentence."""
    from podrl.agents.config_checks import sequence_layout_problem

    assert "does not divide the rollout length 5" in sequence_layout_problem(30, 5, 3, 5, 2)
    assert "not whole rows of period x envs per shard = 2 x 4" in sequence_layout_problem(30, 4, 4, 5, 2)
    assert "fewer than one rollout (4) plus one sequence (5)" in sequence_layout_problem(24, 4, 3, 5, 2)
    assert sequence_layout_problem(ROWS * B, T, B, WINDOW, PERIOD) is None
    replay = prioritised.init(24, {"obs": jax.ShapeDtypeStruct((), jnp.float32)}, PERIOD,
                              {"state": jax.ShapeDtypeStruct((), jnp.float32)})
    with pytest.raises(ValueError, match="plus one sequence"):
        prioritised.add(replay, rollout_items(0), WINDOW, PERIOD, ALPHA)


@pytest.mark.parametrize("count", [1, 3])
def test_refill_onto_another_shard_count_gives_fresh_replays_and_counts_what_it_dropped(count):
    """A resume on another learner-shard count (`Agent.reshard_state`): `count` replays equal to fresh
    ones (empty, no drawable sequence, max priority 1) and every stored step counted as dropped."""
    one = prioritised.init(ROWS * B, {"obs": jax.ShapeDtypeStruct((), jnp.float32)}, PERIOD,
                           {"state": jax.ShapeDtypeStruct((), jnp.float32)})
    filled = one
    for k in range(3):
        filled = prioritised.add(filled, rollout_items(k * T), WINDOW, PERIOD, ALPHA)
    assert float(filled.priorities.tree.nodes[1]) > 0  # sequences were drawable
    saved = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), filled, filled)  # 2 shards
    assert int(saved.steps.size.sum()) > 0
    new, counts = prioritised.refill(saved, count)
    fresh = jax.tree.map(lambda x: np.stack([np.asarray(x)] * count), one)
    assert jax.tree.structure(new) == jax.tree.structure(fresh)
    for got, want in zip(jax.tree.leaves(new), jax.tree.leaves(fresh), strict=True):
        np.testing.assert_array_equal(got, want)
    assert counts == {"kept": 0, "dropped": int(saved.steps.size.sum())}
