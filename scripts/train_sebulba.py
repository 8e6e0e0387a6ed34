"""`podrl sebulba`: train with the Sebulba layout (`--help`: every flag; podrl/cli/train.py)."""
from podrl.cli.main import launch

if __name__ == "__main__":
    raise SystemExit(launch("sebulba"))
