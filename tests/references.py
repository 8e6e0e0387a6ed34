"""NumPy transcriptions the agents' tests check against (float64, term by term from the papers), and their
statistics: V-trace, value rescaling h and h^-1, MuZero's two-hot targets, log-softmax and value read-out,
a chi-square goodness-of-fit p-value, a constant Q network."""

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from podrl.agents.value_rescaling import H_EPSILON
from podrl.agents.value_rescaling import H_EPSILON as EPS


def numpy_vtrace(v_tm1, v_t, r, discount, end, rho, lambda_, clip_rho_threshold, clip_pg_rho_threshold,
                 clip_c_threshold):
    """Espeholt et al. 2018, eq. (1) and section 4.2, term by term (float64):

    v_s = V(x_s) + sum_{t=s}^{e} (prod_{i=s}^{t-1} gamma_i c_i) rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)),
    e = the first step >= s after which the episode ends (or T - 1);
    A_s = rho_pg_s (r_s + gamma_s q_{s+1} - V(x_s)), q_{s+1} = v_{s+1} inside the episode and
    the sequence, else V(x_{s+1}).
    """
    v_tm1, v_t, r, discount, rho = (np.asarray(x, np.float64) for x in (v_tm1, v_t, r, discount, rho))
    end = np.asarray(end, bool)
    n = len(r)
    rho_c = np.minimum(clip_rho_threshold, rho)
    c = lambda_ * np.minimum(clip_c_threshold, rho)
    vs = np.zeros(n)
    for s in range(n):
        total, trace = 0.0, 1.0
        for t in range(s, n):
            total += trace * rho_c[t] * (r[t] + discount[t] * v_t[t] - v_tm1[t])
            if end[t]:
                break
            trace *= discount[t] * c[t]
        vs[s] = v_tm1[s] + total
    pg = np.zeros(n)
    for s in range(n):
        q = vs[s + 1] if s + 1 < n and not end[s] else v_t[s]
        pg[s] = min(clip_pg_rho_threshold, rho[s]) * (r[s] + discount[s] * q - v_tm1[s])
    return vs, pg


def numpy_h(x: float) -> float:
    """Pohlen et al. 2018 / MuZero Appendix F: h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x."""
    return math.copysign(1.0, x) * (math.sqrt(abs(x) + 1.0) - 1.0) + H_EPSILON * x if x else 0.0


def numpy_two_hot(x: float, s: int) -> np.ndarray:
    """The two atoms around x (clipped to [-S, S]) weighted by 1 - distance."""
    x = min(max(x, -s), s)
    probs = np.zeros(2 * s + 1)
    low = math.floor(x)
    probs[low + s] += 1.0 - (x - low)
    if low + 1 <= s:
        probs[low + 1 + s] += x - low
    return probs


def with_head_biases(params, **biases):
    """`params` with the named heads' biases (`policy_head=[A]`, `value_head=[2S + 1]`, ...) replaced;
    their kernels must be zero (as initialised), so those logits equal the biases at every state."""
    heads = dict(params["params"])
    for name, bias in biases.items():
        assert not np.any(np.asarray(heads[name]["kernel"])), f"{name}'s kernel is not zero"
        heads[name] = {**heads[name], "bias": jnp.asarray(bias, jnp.float32)}
    return {**params, "params": heads}


def numpy_log_softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x - x.max() - np.log(np.sum(np.exp(x - x.max())))


def numpy_inverse_h(y: float) -> float:
    """h^-1(y) (Pohlen et al. 2018, Prop. A.2), checked against h itself."""
    x = np.sign(y) * (((np.sqrt(1.0 + 4.0 * EPS * (abs(y) + 1.0 + EPS)) - 1.0) / (2.0 * EPS)) ** 2 - 1.0)
    assert abs(numpy_h(x) - y) < 1e-9
    return float(x)


def numpy_value(logits: np.ndarray, s: int) -> float:
    """The scalar of categorical logits over the h-transformed atoms -S..S: h^-1 of their expectation."""
    return numpy_inverse_h(float(np.exp(numpy_log_softmax(logits)) @ np.arange(-s, s + 1)))


ALPHA_TEST = 1e-3
"""The chi-square test's level: a correct sampler fails it with probability 1e-3 (seeded, so never flaky)."""


def chi_square_p(counts: np.ndarray, weights: np.ndarray) -> float:
    """p-value of draw `counts` per leaf against the probabilities `weights / sum` (leaves of weight 0
    must not be drawn at all: the p-value is 0 if one was)."""
    positive = weights > 0
    if counts[~positive].any():
        return 0.0
    expected = counts.sum() * weights[positive] / weights[positive].sum()
    statistic = float(np.sum((counts[positive] - expected) ** 2 / expected))
    return float(stats.chi2.sf(statistic, df=int(positive.sum()) - 1))


def constant_q(network_params, values: list[float]):
    """Q-network params with Q(o, a) = values[a] for every observation (all weights 0, the head's bias)."""
    params = jax.tree.map(jnp.zeros_like, network_params)
    params["params"]["q_head"]["bias"] = jnp.asarray(values, jnp.float32)
    return params
