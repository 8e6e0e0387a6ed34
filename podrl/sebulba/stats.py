"""Per-window Sebulba metrics: SPS, episodes, policy lag, stage timings, queue depths."""

from __future__ import annotations

from typing import Any

import numpy as np

from podrl.core.distributed import host_sum


class WindowStats:
    """Accumulates what the learner consumed since the last log record."""

    def __init__(self, threads: list):
        self.threads = threads
        self._last_steps, self._last_time = 0, 0.0
        self._last_waits = {"put": 0.0, "params": 0.0}
        self._reset()

    def _reset(self) -> None:
        self.sums: dict[str, float] = {}
        self.metrics: dict[str, list[float]] = {}
        self.lags: list[int] = []
        self.returns = self.lengths = 0.0
        self.episodes = 0
        self.updates = 0

    def _add(self, name: str, value: float) -> None:
        self.sums[name] = self.sums.get(name, 0.0) + value

    def add(self, rollouts: list, metrics: dict[str, Any], lags: np.ndarray, queue_wait: float, learner: float) -> None:
        self.updates += 1
        for r in rollouts:
            self.returns += r.episode_return_sum
            self.lengths += r.episode_length_sum
            self.episodes += r.episodes
            self._add("time/env_step_s", r.env_seconds)
            self._add("time/inference_s", r.inference_seconds)
            self._add("time/actor_transfer_s", r.transfer_seconds)
        self._add("time/learner_queue_wait_s", queue_wait)
        self._add("time/learner_step_s", learner)
        self._add("queue_depth", float(np.mean([t.out.qsize() for t in self.threads])))
        for k, v in metrics.items():
            self.metrics.setdefault(f"train/{k}", []).append(float(v))
        self.lags.extend(int(x) for x in lags)

    def flush(self, env_steps: int, elapsed: float) -> dict[str, Any]:
        """The window's record (timings are per update, summed over threads for actor stages)."""
        record: dict[str, Any] = {k: float(np.mean(v)) for k, v in self.metrics.items()}
        record.update({k: v / self.updates for k, v in self.sums.items()})
        for name, attr, key in (("put", "put_wait_seconds", "time/actor_queue_put_wait_s"),
                                ("params", "params_wait_seconds", "time/actor_params_wait_s")):
            total = sum(getattr(t, attr) for t in self.threads)
            record[key] = (total - self._last_waits[name]) / self.updates  # summed over threads
            self._last_waits[name] = total
        record["sps"] = (env_steps - self._last_steps) / max(elapsed - self._last_time, 1e-9)
        self._last_steps, self._last_time = env_steps, elapsed
        returns, lengths, episodes = host_sum(np.array([self.returns, self.lengths, self.episodes]))
        record["episode_return"] = returns / episodes if episodes else None  # over every host's episodes
        record["episode_length"] = lengths / episodes if episodes else None
        record["episodes"] = int(episodes)
        record["policy_lag_mean"] = float(np.mean(self.lags))
        record["policy_lag_max"] = int(np.max(self.lags))
        self._reset()
        return record
