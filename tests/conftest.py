import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
REBALANCE = Path(sys.executable).parent / "rebalance"


def run_cli(*args, cwd=None):
    """Run the real `rebalance` command; returns (exit code, stdout, stderr)."""
    p = subprocess.run([str(REBALANCE), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                       env={**os.environ, "COLUMNS": "200"})
    return p.returncode, p.stdout, p.stderr
