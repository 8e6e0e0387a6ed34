"""gymnasium's `info["action_mask"]` brought into the observation's `action_mask` leaf (the one
convention of `podrl.envs.observations`).

Some gymnasium envs (Taxi-v4) report their legal actions in `info["action_mask"]` (int8 / bool
`[num_actions]`, 1 = legal) at every reset and step, not in the observation. The host adapter
(`podrl.envs.adapters.gymnasium.GymnasiumVectorEnv`) finds out by resetting one env before the
run does (`reports_info_mask`) and then joins the mask to each observation (`join`): a `Dict`
observation gains the key `action_mask`; any other becomes `{"observation": ..., "action_mask":
...}` (`with_mask_spec` the spec of that). The final observation of an episode (the bootstrap
state of a time limit) gets the mask of its own step, from `infos["final_info"]` (SAME_STEP
vector envs) or from the step's infos (NEXT_STEP / DISABLED, which reset afterwards).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from dm_env import specs

from podrl.envs.observations import ACTION_MASK, mask_of
from podrl.envs.types import ObservationSpec

OBSERVATION = "observation"
"""The key of a non-dict observation once the info mask joins it."""


def reports_info_mask(vector_env: Any, factory: Callable[[], Any] | None, seed: int = 0) -> bool:
    """Whether the envs report `info["action_mask"]` on reset: the first env of a `SyncVectorEnv` is reset
    (the run resets it again), else one env from `factory` is built, reset and closed; False for
    another vector env without a factory (the adapter's `info_action_mask=True` says so instead)."""
    first = getattr(vector_env, "envs", [None])[0]
    if first is None and factory is None:
        return False
    env = first if first is not None else factory()
    try:
        _, info = env.reset(seed=seed)
        return isinstance(info, dict) and ACTION_MASK in info
    finally:
        if first is None:
            env.close()


def with_mask_spec(spec: ObservationSpec, num_actions: int) -> ObservationSpec:
    """The spec of `join`'s observations: `spec`'s dict with an `action_mask` key, or
    `{"observation": spec, "action_mask": ...}`; the mask bool `[num_actions]`."""
    mask = specs.Array((int(num_actions),), bool, name=ACTION_MASK)
    if isinstance(spec, dict):
        if mask_of(spec) is not None:
            return spec
        return {**spec, ACTION_MASK: mask}
    return {OBSERVATION: spec, ACTION_MASK: mask}


def join(observation: Any, mask: np.ndarray) -> Any:
    """`observation` (batched or one env's) with `mask` in its `action_mask` leaf (see `with_mask_spec`)."""
    if isinstance(observation, dict):
        return observation if ACTION_MASK in observation else {**observation, ACTION_MASK: mask}
    return {OBSERVATION: observation, ACTION_MASK: mask}


def batch_mask(infos: Any, num_envs: int, num_actions: int, env_name: str) -> tuple[np.ndarray, np.ndarray]:
    """`(mask bool [B, A], present bool [B])` from a vector env's `infos` (`infos["action_mask"]` and
    gymnasium's `infos["_action_mask"]` rows); rows without one are all False and not `present`."""
    if not isinstance(infos, dict) or ACTION_MASK not in infos:
        return np.zeros((num_envs, num_actions), bool), np.zeros(num_envs, bool)
    mask = np.asarray(infos[ACTION_MASK]) != 0
    if mask.shape != (num_envs, num_actions):
        raise ValueError(f"{env_name}: info['action_mask'] has shape {mask.shape[1:]} per env, expected "
                         f"({num_actions},) (one flag per action of the action space)")
    present = np.asarray(infos.get("_" + ACTION_MASK, np.ones(num_envs, bool)), bool)
    return mask, present


def require_all(present: np.ndarray, env_name: str, where: str) -> None:
    """ValueError unless every env reported its mask in `where` (a reset or a step)."""
    if not present.all():
        missing = np.flatnonzero(~present).tolist()
        raise ValueError(f"{env_name} reported info['action_mask'] on reset but not on the {where} of env(s) "
                         f"{missing}: podrl needs the legal actions of every observation")
