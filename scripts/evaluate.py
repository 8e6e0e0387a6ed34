"""`podrl evaluate`: the greedy policy of a checkpoint (podrl/cli/evaluate.py)."""
from podrl.cli.main import launch

if __name__ == "__main__":
    raise SystemExit(launch("evaluate"))
