"""`podrl launch`: a training command as N local processes, a CPU pod (podrl/cli/launch.py)."""
from podrl.cli.main import launch

if __name__ == "__main__":
    raise SystemExit(launch("launch"))
