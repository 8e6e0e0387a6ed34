"""Conformance checks for your own agent and JAX env."""

from podrl.testing.errors import AgentCheckError
from podrl.testing.shards import check_learner_shards, layout_update, of_shard, on_shards

__all__ = ["AgentCheckError", "check_learner_shards", "layout_update", "of_shard", "on_shards"]
