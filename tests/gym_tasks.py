"""Tiny gymnasium envs for tests that need a host env PPO learns in a few updates.

Kept to gymnasium and numpy so that spawned `AsyncVectorEnv` workers import it cheaply
(name it as `gym_tasks:PickTheLit`; the tests folder is on the workers' sys.path).
"""

from __future__ import annotations

import gymnasium
import numpy as np


class PickTheLit(gymnasium.Env):
    """Observe a one-hot float32 [4] (a uniform random index each step); action i earns 1 if
    index i is lit, else 0. Episodes terminate after 8 steps: the best return is 8, a constant
    or random policy scores 2 on average, and an untrained network's greedy mapping of the four
    inputs is right only where its random init happens to be."""

    LENGTH, SIZE = 8, 4
    observation_space = gymnasium.spaces.Box(0.0, 1.0, (SIZE,), np.float32)
    action_space = gymnasium.spaces.Discrete(SIZE)

    def _observe(self) -> np.ndarray:
        self._lit = int(self.np_random.integers(self.SIZE))
        return np.eye(self.SIZE, dtype=np.float32)[self._lit]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._observe(), {}

    def step(self, action):
        reward = float(int(action) == self._lit)
        self._t += 1
        return self._observe(), reward, self._t >= self.LENGTH, False, {}
