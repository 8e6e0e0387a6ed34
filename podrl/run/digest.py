"""The "digest" item of a checkpoint: a sha256 of every array this process can read in full.

tensorstore keeps no checksum, and flipped bytes would otherwise load as garbage, so every
checkpoint carries `{"state": {path: sha256}, "params": {path: sha256}}` and a restore checks it
(`check`). Hashing gigabytes of replay buffer takes seconds, so a save must not wait for it: the
`DigestHandler` takes this process's host copies of the arrays while the save is being started
(the next training call may donate the device buffers; on CPU the "copy" is a view of the buffer,
which keeps the runtime from donating it) and hashes them in orbax's background commit thread,
before the step is finalized, so a step on disk always holds its digest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from typing import Any, Mapping

import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint import args as ocp_args
from orbax.checkpoint._src.futures import future
from orbax.checkpoint._src.multihost import multihost


def keys_to_data(tree: Any) -> Any:
    """`tree` with typed PRNG keys replaced by their raw key data (what checkpoints hold)."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if is_key(x) else x, tree)


def is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def host_copies(tree: Any) -> dict[str, np.ndarray]:
    """The fully addressable leaves of `tree` (keys as key data) on the host, by tree path; a leaf
    another process holds part of is left out (that process checks its own shards)."""
    leaves = [(jax.tree_util.keystr(path), leaf)
              for path, leaf in jax.tree_util.tree_leaves_with_path(keys_to_data(tree))
              if not (isinstance(leaf, jax.Array) and not leaf.is_fully_addressable)]
    for _, leaf in leaves:  # start every device-to-host copy before waiting for the first
        if isinstance(leaf, jax.Array):
            leaf.copy_to_host_async()
    return {path: np.asarray(leaf) for path, leaf in leaves}


def sha256s(copies: Mapping[str, np.ndarray]) -> dict[str, str]:
    """sha256 of each array's bytes and dtype, by path."""
    out = {}
    for path, data in copies.items():
        data = np.ascontiguousarray(data)
        out[path] = hashlib.sha256(data.tobytes() + str(data.dtype).encode()).hexdigest()
    return out


def digest(tree: Any) -> dict[str, str]:
    """sha256 of each fully addressable leaf of `tree` (key data for keys), by tree path."""
    return sha256s(host_copies(tree))


def mismatches(restored: Any, expected: Mapping[str, str]) -> list[str]:
    """The paths of `restored` whose digest differs from `expected`'s. Paths `expected` lacks are not
    compared: the writer could not read them in full (another process held part of them)."""
    return [path for path, value in digest(restored).items() if path in expected and expected[path] != value]


class DigestHandler(ocp.AsyncCheckpointHandler):
    """Writes the digest item (module docstring): host copies now, hashes in the background."""

    def __init__(self, filename: str | None = None, **kwargs: Any):
        del kwargs
        self._filename = filename or "metadata"

    async def _write(self, copies: dict[str, dict[str, np.ndarray]], directory) -> None:
        digests = await asyncio.to_thread(lambda: {item: sha256s(c) for item, c in copies.items()})
        if multihost.is_primary_host(0):
            (directory / self._filename).write_text(json.dumps(digests))

    async def async_save(self, directory, args: "DigestSave") -> list[future.Future]:
        copies = {item: host_copies(tree) for item, tree in args.trees.items()}
        return [future.CommitFutureAwaitingContractedSignals(self._write(copies, directory), name="podrl_digest")]

    def save(self, directory, args: "DigestSave") -> None:
        for f in asyncio.run(self.async_save(directory, args)):
            f.result()

    def restore(self, directory, args: "DigestRestore" = None) -> dict[str, dict[str, str]]:
        del args
        path = directory / self._filename
        if not path.exists():
            raise FileNotFoundError(f"{path} not found")
        return json.loads(path.read_text())


@ocp_args.register_with_handler(DigestHandler, for_save=True)
@dataclasses.dataclass
class DigestSave(ocp_args.CheckpointArgs):
    """The trees to digest, by item name ({"state": ..., "params": ...})."""

    trees: Mapping[str, Any]


@ocp_args.register_with_handler(DigestHandler, for_restore=True)
@dataclasses.dataclass
class DigestRestore(ocp_args.CheckpointArgs):
    """Reads a digest item back."""
