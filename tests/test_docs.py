"""Issue 41 item 2: the documentation site's tutorials run as written. Every ```bash block
of a tutorial page is executed, the page's blocks in order as one script (``set -euo
pipefail``) in an empty folder with this environment's ``rebalance`` first on the PATH;
a stale command fails the test. The site itself is built by ``make docs`` (``mkdocs build
--strict``). Marked ``docs``: CI runs these in its docs stage, not in the default suite."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mktestdocs import grab_code_blocks

from conftest import ROOT

pytestmark = pytest.mark.docs
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
SHELLS = re.compile(r"^```(sh|shell|console|zsh)\s*$", re.M)


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_every_shell_block_of_the_tutorial_runs(page: Path, tmp_path):
    text = page.read_text()
    assert not SHELLS.search(text), f"{page.name}: shell blocks are ```bash (run here) or ```text (not run)"
    blocks = grab_code_blocks(text, lang="bash")
    if not blocks:
        pytest.skip(f"{page.name} has no bash block")
    script = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + "\n".join(blocks)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "120"}
    p = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{page.name} (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


def test_every_tutorial_is_in_the_site():
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(f"tutorials/{p.name}" in nav for p in TUTORIALS)
