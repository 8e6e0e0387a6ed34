"""Small envs whose rewards turn NaN, for the driver's tests (importable as `faulty_envs:<Class>` by the CLIs
when `tests/` is on PYTHONPATH)."""

from __future__ import annotations

import jax.numpy as jnp

import podrl.envs


class NaNWhenRepeated:
    """MatchSign (40-step episodes) with the cue hidden (zero observations): the reward turns NaN once the
    same action was taken `repeats` times in a row. A greedy policy on a constant observation always
    repeats its action, so its evaluation episodes hit NaN at step `repeats`; sampled training actions
    (an untrained, near-uniform policy) practically never do (probability ~2**-29 per window)."""

    def __init__(self, repeats: int = 30):
        self.inner = podrl.envs.make("MatchSign-v0", episode_length=40)
        self.repeats = repeats

    def reset(self, key):
        state, ts = self.inner.reset(key)
        zero = jnp.asarray(0, jnp.int32)
        return (state, zero - 1, zero), ts._replace(observation=jnp.zeros_like(ts.observation))

    def step(self, state, action):
        inner, previous, run = state
        inner, ts = self.inner.step(inner, action)
        run = jnp.where(action == previous, run + 1, 1)
        reward = jnp.where(run >= self.repeats, jnp.nan, ts.reward)
        return (inner, action, run), ts._replace(reward=reward, observation=jnp.zeros_like(ts.observation))

    def observation_spec(self):
        return self.inner.observation_spec()

    def action_spec(self):
        return self.inner.action_spec()


class NaNAfter:
    """MatchSign whose reward becomes NaN from the `bad_after`-th step of an env instance on."""

    def __init__(self, bad_after: int = 40):
        self.inner = podrl.envs.make("MatchSign-v0", episode_length=1_000_000)
        self.bad_after = bad_after

    def reset(self, key):
        state, ts = self.inner.reset(key)
        return (state, jnp.asarray(0, jnp.int32)), ts

    def step(self, state, action):
        inner, count = state
        inner, ts = self.inner.step(inner, action)
        return (inner, count + 1), ts._replace(reward=jnp.where(count + 1 >= self.bad_after, jnp.nan, ts.reward))

    def observation_spec(self):
        return self.inner.observation_spec()

    def action_spec(self):
        return self.inner.action_spec()
