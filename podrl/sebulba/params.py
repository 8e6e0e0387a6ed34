"""The versioned parameter source between the learner and the actor threads.

Staleness protocol (the setting `lag`), for rollout `i` of every actor thread
(update `i` consumes rollout `i` of every thread and publishes version `i + 1`;
version 0 is the initial params):

* fixed lag L (`lag="0"`, `"1"`, ...): rollout `i` uses exactly version
  `max(0, i - L)`, waiting for it if needed. L = 0 is synchronous on-policy
  learning (actors and learner alternate); L = 1 is Cleanba's protocol (actors
  collect rollout `i` while the learner computes update `i - 1`). The learner
  sees a policy lag of exactly `min(i, L)` at update `i`.
* async (`lag="async"`): a rollout uses the newest published version and never
  waits. With at most `queue_size` rollouts queued per thread, the lag is at most
  `queue_size + 1`.

The learner blocks until new params are computed (`block_until_ready`) before
publishing them, and each version is copied once to every actor device.
"""

from __future__ import annotations

import threading
from typing import Any

import jax

from podrl.core.mesh import local_replica
from podrl.sebulba.stopping import StopSignal


class ParamsSource:
    """Holds the published param versions each actor thread may still need."""

    def __init__(self, actor_devices: list[jax.Device], lag: int | None, stop: StopSignal, timeout: float,
                 first_version: int = 0):
        self.actor_devices = actor_devices
        self.lag, self.first_version = lag, first_version  # first_version > 0 when resuming
        self._stop, self._timeout = stop, timeout
        self._cond = threading.Condition()
        self._versions: dict[int, list[Any]] = {}
        self.latest = -1

    def publish(self, params: Any, version: int) -> None:
        """Makes `params` version `version` (ready and on every actor device) available."""
        params = jax.block_until_ready(params)
        local = local_replica(params)
        copies = [jax.device_put(local, device) for device in self.actor_devices]
        keep_from = version - (self.lag or 0)
        with self._cond:
            self._versions[version] = copies
            self.latest = version
            for old in [v for v in self._versions if v < keep_from]:
                del self._versions[old]
            self._cond.notify_all()

    def version_for(self, rollout: int) -> int | None:
        """The version rollout `rollout` must use (None in async mode: the latest)."""
        return None if self.lag is None else max(self.first_version, rollout - self.lag)

    def for_rollout(self, rollout: int, device_slot: int) -> tuple[Any, int]:
        """`(params on actor device device_slot, version)` for rollout `rollout`."""
        wanted = self.version_for(rollout)

        def ready():
            with self._cond:
                version = self.latest if wanted is None else wanted
                if version in self._versions:
                    return self._versions[version][device_slot], version
            return None

        what = f"params version {wanted if wanted is not None else 'any'} for rollout {rollout}"
        return self._stop.wait_for(ready, self._timeout, what, condition=self._cond)
