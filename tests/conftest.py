import json
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


@pytest.fixture
def check_json(tmp_path):
    """Run `rebalance check ... --json --out tmp`; returns (exit code, summary)."""
    def go(*args):
        code, out, err = run_cli("check", *args, "--json", "--out", tmp_path / "out", cwd=tmp_path)
        assert out, err
        return code, json.loads(out)
    return go
