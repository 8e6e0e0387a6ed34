"""Reinforcement-learning algorithms for podrl.

Each algorithm lives in its own package (`agents.ppo`, ...) with `config.py`,
`networks.py`, `losses.py` and `agent.py`, and talks to the runtime only through
`podrl.types.Agent`. Shared return estimators live in `agents.returns`.
"""
