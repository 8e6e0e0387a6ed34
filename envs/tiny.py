"""Tiny environments that agents learn in seconds, for fast tests.

`MatchCue` (discrete) and `ReachCue` (continuous) are the learning checks: an
untrained greedy policy scores far below their optimum (see their docstrings),
so a test that asserts a high return proves that training happened.
`RecallCue` is the memory task: its cue is shown once and asked for `delay` steps later,
so only an agent with memory (a recurrent core) beats chance.
`DictCue` is `MatchCue` seen through a dict observation (an image that shows the cue and a vector
of noise), `MaskedCue` the legal-action mask check: its illegal actions pay the most and end the
episode (`podrl.envs.observations`).

`MatchSign`: each observation is a random sign s in {-1, +1}; action 1 means
"positive" and action 0 "negative". Matching the sign earns 1, otherwise 0.
Signs are i.i.d. and independent of the actions, so the optimal policy is
``action = (obs > 0)``, a linear function of the observation.

With the default ``episode_length = 16``:

- optimal return = episode_length = 16 (every step matched);
- uniformly random policy: expected return = episode_length / 2 = 8.

The episode *terminates* (LAST, discount 0) on its `episode_length`-th step,
so no time limit is needed (`podrl.envs.make("MatchSign-v0")` adds none).
Its untrained greedy policy is perfect or perfectly wrong (an odd network of
+-1 inputs), so it is no learning check.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from dm_env import specs

from podrl.envs.types import Array, PRNGKey, TimeStep, restart, transition


class MatchSignState(NamedTuple):
    """The current sign and the randomness for the next ones.

    Attributes:
      key: PRNG key, typed [] or raw uint32 [2] (as given to `reset`), draws the next sign.
      sign: float32 [], the sign currently observed, -1 or +1.
      t: int32 [], steps taken in this episode.
    """

    key: PRNGKey
    sign: Array
    t: Array


class MatchSign:
    """Say whether the observed number is positive (see module docstring)."""

    def __init__(self, episode_length: int = 16):
        if episode_length <= 0:
            raise ValueError(f"episode_length must be positive, got {episode_length}")
        self.episode_length = int(episode_length)

    def reset(self, key: PRNGKey) -> tuple[MatchSignState, TimeStep]:
        key, sign = _draw_sign(key)
        state = MatchSignState(key, sign, jnp.asarray(0, jnp.int32))
        return state, restart(sign[None])

    def step(self, state: MatchSignState, action: Array) -> tuple[MatchSignState, TimeStep]:
        reward = jnp.where(action == (state.sign > 0), 1.0, 0.0)
        key, sign = _draw_sign(state.key)
        t = state.t + 1
        new = MatchSignState(key, sign, t)
        return new, transition(sign[None], reward, t >= self.episode_length)

    def observation_spec(self) -> specs.Array:
        return specs.Array((1,), np.float32, name="observation")

    def action_spec(self) -> specs.DiscreteArray:
        return specs.DiscreteArray(2, name="action")


def _draw_sign(key: PRNGKey) -> tuple[PRNGKey, Array]:
    key, sub = jax.random.split(key)
    sign = jnp.where(jax.random.bernoulli(sub), 1.0, -1.0).astype(jnp.float32)
    return key, sign


class CueState(NamedTuple):
    """The current cue and the randomness for the next ones.

    Attributes:
      key: PRNG key (typed [] or raw uint32 [2]), draws the next cue.
      cue: int32 [], the cue currently shown, in [0, num_cues).
      t: int32 [], steps taken in this episode.
    """

    key: PRNGKey
    cue: Array
    t: Array


class MatchCue:
    """Name the shown cue: one of `num_cues` cues, observed one-hot; action i earns 1 iff the cue is i.

    Cues are i.i.d. uniform and independent of the actions; an episode terminates on
    its `episode_length`-th step. With the defaults (4 cues, 16 steps): optimal return
    16, uniformly random policy 4. An untrained greedy policy maps each cue to one
    fixed action, so it expects 4 and is perfect for 1 network in 4**4 = 256.
    """

    def __init__(self, num_cues: int = 4, episode_length: int = 16):
        if num_cues < 2 or episode_length <= 0:
            raise ValueError(f"need num_cues >= 2 and episode_length > 0, got {num_cues}, {episode_length}")
        self.num_cues, self.episode_length = int(num_cues), int(episode_length)

    def reset(self, key: PRNGKey) -> tuple[CueState, TimeStep]:
        key, cue = self._draw(key)
        state = CueState(key, cue, jnp.asarray(0, jnp.int32))
        return state, restart(self._observe(cue))

    def step(self, state: CueState, action: Array) -> tuple[CueState, TimeStep]:
        reward = self.reward(state.cue, action)
        key, cue = self._draw(state.key)
        t = state.t + 1
        return CueState(key, cue, t), transition(self._observe(cue), reward, t >= self.episode_length)

    def reward(self, cue: Array, action: Array) -> Array:
        return jnp.where(action == cue, 1.0, 0.0).astype(jnp.float32)

    def observation_spec(self) -> specs.Array:
        return specs.Array((self.num_cues,), np.float32, name="observation")

    def action_spec(self) -> specs.Array:
        return specs.DiscreteArray(self.num_cues, name="action")

    def _observe(self, cue: Array) -> Array:
        return jax.nn.one_hot(cue, self.num_cues, dtype=jnp.float32)

    def _draw(self, key: PRNGKey) -> tuple[PRNGKey, Array]:
        key, sub = jax.random.split(key)
        return key, jax.random.randint(sub, (), 0, self.num_cues, jnp.int32)


class ReachCue(MatchCue):
    """`MatchCue` with one continuous action: move it to the cue's target.

    Cue i's target is `linspace(-1, 1, num_cues)[i]`; the reward is
    `1 - |clip(action, -1, 1) - target|`, in [-1, 1]. With the defaults: optimal
    return 16; a policy that always answers 0 (an untrained Gaussian head, whose
    mean starts near 0) expects 16 * (1 - 2/3) = 5.3.
    """

    def reward(self, cue: Array, action: Array) -> Array:
        target = jnp.linspace(-1.0, 1.0, self.num_cues)[cue]
        return (1.0 - jnp.abs(jnp.clip(action[0], -1.0, 1.0) - target)).astype(jnp.float32)

    def action_spec(self) -> specs.BoundedArray:
        return specs.BoundedArray((1,), np.float32, -1.0, 1.0, name="action")


class RecallCue:
    """Remember a cue over a delay: the memory task (a feed-forward policy can only guess).

    An episode is `delay + 2` steps. Observations are `[num_cues + 1]` float32:

    - step 0: the cue, one-hot in the first `num_cues` entries (last entry 0);
    - steps 1 .. delay: blank (all zeros);
    - step delay + 1: the query (last entry 1, the rest 0).

    The action at the query step is the answer: reward +1 if it names the cue, -1 otherwise;
    every other step earns 0 whatever the action, and the episode terminates after the answer.
    Cues are uniform and independent of everything else, and the query observation is the same
    for every cue, so any policy without memory answers right with probability 1 / num_cues:
    chance = expected return `2 / num_cues - 1` (0 with the default 2 cues); remembering the
    cue scores 1.
    """

    def __init__(self, num_cues: int = 2, delay: int = 4):
        if num_cues < 2 or delay < 0:
            raise ValueError(f"need num_cues >= 2 and delay >= 0, got {num_cues}, {delay}")
        self.num_cues, self.delay = int(num_cues), int(delay)

    @property
    def chance_return(self) -> float:
        """Expected return of any memoryless policy: 2 / num_cues - 1."""
        return 2.0 / self.num_cues - 1.0

    def reset(self, key: PRNGKey) -> tuple[CueState, TimeStep]:
        key, sub = jax.random.split(key)
        cue = jax.random.randint(sub, (), 0, self.num_cues, jnp.int32)
        state = CueState(key, cue, jnp.asarray(0, jnp.int32))
        return state, restart(self._observe(cue, state.t))

    def step(self, state: CueState, action: Array) -> tuple[CueState, TimeStep]:
        answered = state.t == self.delay + 1
        reward = jnp.where(answered, jnp.where(action == state.cue, 1.0, -1.0), 0.0)
        t = state.t + 1
        return state._replace(t=t), transition(self._observe(state.cue, t), reward, answered)

    def observation_spec(self) -> specs.Array:
        return specs.Array((self.num_cues + 1,), np.float32, name="observation")

    def action_spec(self) -> specs.DiscreteArray:
        return specs.DiscreteArray(self.num_cues, name="action")

    def _observe(self, cue: Array, t: Array) -> Array:
        shown = jax.nn.one_hot(cue, self.num_cues, dtype=jnp.float32) * (t == 0)
        query = (t == self.delay + 1).astype(jnp.float32)[None]
        return jnp.concatenate([shown, query])


class DictCue(MatchCue):
    """`MatchCue` through a dict observation: only its image leaf tells the cue.

    Observations: `{"image": uint8 [4, 4, 1], "noise": float32 [2]}`: cue i lights quadrant i of the
    image (its 2 x 2 pixels 255, the rest 0; quadrants row-major), the noise is uniform in [-1, 1] and
    independent of everything. Up to 4 cues; rewards and returns as `MatchCue` (optimum 16, uniform
    random 4; an untrained greedy policy maps each cue to one fixed action, so it expects 4).
    """

    def __init__(self, num_cues: int = 4, episode_length: int = 16):
        if num_cues > 4:
            raise ValueError(f"DictCue shows at most 4 cues (the image's quadrants), got {num_cues}")
        super().__init__(num_cues, episode_length)

    def reset(self, key: PRNGKey) -> tuple[CueState, TimeStep]:
        key, cue = self._draw(key)
        key, noise = _uniform(key, (2,))
        return CueState(key, cue, jnp.asarray(0, jnp.int32)), restart(self._dict(cue, noise))

    def step(self, state: CueState, action: Array) -> tuple[CueState, TimeStep]:
        reward = self.reward(state.cue, action)
        key, cue = self._draw(state.key)
        key, noise = _uniform(key, (2,))
        t = state.t + 1
        return CueState(key, cue, t), transition(self._dict(cue, noise), reward, t >= self.episode_length)

    def observation_spec(self) -> dict[str, specs.Array]:
        return {"image": specs.BoundedArray((4, 4, 1), np.uint8, 0, 255, name="image"),
                "noise": specs.BoundedArray((2,), np.float32, -1.0, 1.0, name="noise")}

    def _dict(self, cue: Array, noise: Array) -> dict[str, Array]:
        row, col = cue // 2, cue % 2
        rows, cols = jnp.arange(4)[:, None] // 2, jnp.arange(4)[None, :] // 2
        image = jnp.where((rows == row) & (cols == col), 255, 0).astype(jnp.uint8)[..., None]
        return {"image": image, "noise": noise}


def _uniform(key: PRNGKey, shape: tuple[int, ...]) -> tuple[PRNGKey, Array]:
    key, sub = jax.random.split(key)
    return key, jax.random.uniform(sub, shape, jnp.float32, -1.0, 1.0)


class MaskedCueState(NamedTuple):
    """`CueState` with the legal actions.

    Attributes:
      key: PRNG key, draws the next cue and legal set. cue: int32 [], the cue shown (a legal action).
      legal: int32 [], the legal actions as bits (bit a set: action a is legal). t: int32 [], steps taken.
    """

    key: PRNGKey
    cue: Array
    legal: Array
    t: Array


class MaskedCue(MatchCue):
    """Name the cue among the legal actions, where the illegal actions are the tempting ones.

    Observations: `{"cue": float32 one-hot [num_cues], "action_mask": bool [num_cues]}`. At each step the
    cue is uniform and legal, every other action legal with probability 1/2. Rewards: the cue 1, another
    legal action 0, an illegal action 2 (the largest: what a policy or a Q target that ignores the mask
    goes for), and an illegal action terminates the episode. Otherwise an episode terminates on its
    `episode_length`-th step, so an episode shorter than that had an illegal action (its last). With the
    defaults (4 cues, 16 steps): optimum 16, a uniformly random legal action 7.5 (16 E[1 / (1 + Bin(3,
    1/2))]); ignoring the mask ends an episode at its first illegal action.
    """

    def reset(self, key: PRNGKey) -> tuple[MaskedCueState, TimeStep]:
        key, cue, legal = self._draw_legal(key)
        return MaskedCueState(key, cue, legal, jnp.asarray(0, jnp.int32)), restart(self._masked(cue, legal))

    def step(self, state: MaskedCueState, action: Array) -> tuple[MaskedCueState, TimeStep]:
        allowed = ((state.legal >> action) & 1) == 1
        reward = jnp.where(allowed, self.reward(state.cue, action), 2.0).astype(jnp.float32)
        key, cue, legal = self._draw_legal(state.key)
        t = state.t + 1
        ended = (t >= self.episode_length) | ~allowed
        return MaskedCueState(key, cue, legal, t), transition(self._masked(cue, legal), reward, ended)

    def observation_spec(self) -> dict[str, specs.Array]:
        return {"cue": specs.Array((self.num_cues,), np.float32, name="cue"),
                "action_mask": specs.Array((self.num_cues,), bool, name="action_mask")}

    def _draw_legal(self, key: PRNGKey) -> tuple[PRNGKey, Array, Array]:
        """The cue, and the legal set (the cue and each other action with probability 1/2) as a bit field int32
        `[]`. (Not `jax.random.permutation`: on jax 0.10.2 its sort drops the key's varying type inside
        shard_map, which a learner's scan then refuses.)"""
        key, cue_key, legal_key = jax.random.split(key, 3)
        cue = jax.random.randint(cue_key, (), 0, self.num_cues, jnp.int32)
        legal = jax.random.bernoulli(legal_key, 0.5, (self.num_cues,)) | (jnp.arange(self.num_cues) == cue)
        bits = jnp.sum(jnp.where(legal, 1 << jnp.arange(self.num_cues), 0))
        return key, cue, bits.astype(jnp.int32)

    def _masked(self, cue: Array, bits: Array) -> dict[str, Array]:
        mask = ((bits >> jnp.arange(self.num_cues)) & 1) == 1
        return {"cue": self._observe(cue), "action_mask": mask}
