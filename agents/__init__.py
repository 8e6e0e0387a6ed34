"""Reinforcement-learning algorithms for podrl.

Each algorithm lives in its own package (`agents.ppo`, `agents.impala`, ...) with
`config.py`, `losses.py` and `agent.py`, and talks to the runtime only through
`podrl.types.Agent`. Shared pieces: the actor-critic networks and action
distributions in `agents.networks`, return estimators (GAE, V-trace) in
`agents.returns`, the actor-critic agent plumbing (init, acting, optimizer,
SGD step) in `agents.actor_critic`, config field checks in `agents.config_checks`.
"""
