"""`podrl plot`: learning curves of run folders as PNG files (podrl/reports/plot.py)."""
from podrl.cli.main import launch

if __name__ == "__main__":
    raise SystemExit(launch("plot"))
