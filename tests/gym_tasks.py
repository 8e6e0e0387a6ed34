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


class MaskedDictTask(gymnasium.Env):
    """Dict observations (a uint8 image [3, 3, 1] and a float32 position [2]) and `info["action_mask"]`
    (int8 [4], at least one legal action), all drawn from `np_random` at each reset and step. An episode
    terminates when the drawn position[0] exceeds 0.6 (after the action) and is cut after LIMIT steps
    (gymnasium's TimeLimit, `make_masked_dict_task`), so runs hold terminations, truncations and resets."""

    LIMIT = 5
    observation_space = gymnasium.spaces.Dict({
        "image": gymnasium.spaces.Box(0, 255, (3, 3, 1), np.uint8),
        "position": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32),
    })
    action_space = gymnasium.spaces.Discrete(4)

    def _draw(self):
        image = self.np_random.integers(0, 256, (3, 3, 1)).astype(np.uint8)
        position = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        mask = (self.np_random.random(4) < 0.5).astype(np.int8)
        mask[self.np_random.integers(4)] = 1
        return {"image": image, "position": position}, {"action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._draw()

    def step(self, action):
        obs, info = self._draw()
        return obs, float(action), bool(obs["position"][0] > 0.6), False, info


def make_masked_dict_task():
    return gymnasium.wrappers.TimeLimit(MaskedDictTask(), MaskedDictTask.LIMIT)
