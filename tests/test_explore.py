"""``rebalance explore`` (cli/explore.py, checker/explorer.py) driven in headless Chromium
through Playwright, the browser Debian's ``chromium`` package (``make test`` installs it):
a counterexample that ``check`` wrote is opened, stepped through by its links, the enabled
actions and the step-back link, and its violating step's ownership read off the page."""
import json
import os
import re
import shutil
import subprocess
from collections import defaultdict

import pytest
from click.testing import CliRunner
from conftest import REBALANCE

from rebalance import examples
from rebalance.checker.explorer import Explorer
from rebalance.checker.settings import load_toml, resolve
from rebalance.cli import main
from rebalance.explore import Page, parse

# assign-twice: a test-only assignor that gives t-0 to two members (model/mutations.py); check
# catches it as exclusive_ownership in 20 steps (about a second)
ASSIGN_TWICE = """
[group]
topics = { t = 3 }
[members]
initial = 1
joiners = 1
[faults]
kinds = ["join", "crash"]
budget = 2
[check]
mutations = ["assign-twice"]
continue = true
"""


def sync_playwright():
    """Playwright's entry point, with Debian's chromium there to drive; skipped where either
    is missing, but never in CI (``CI`` set), where ``make test`` installs both."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or shutil.which("chromium") is None:
        if os.environ.get("CI"):
            pytest.fail("Playwright (pip playwright) or Debian's chromium is missing: make test installs them")
        pytest.skip("needs pip playwright and Debian's chromium (make test installs them)")
    return sync_playwright()


def owners(page) -> dict:
    """Partition -> the lanes the page's lane table says own it."""
    out = defaultdict(list)
    for row in page.locator("#lanes tr[data-lane]").all():
        for p in row.locator("td.owned .partition").all_inner_texts():
            out[p].append(row.get_attribute("data-lane"))
    return dict(out)


@pytest.mark.browser
def test_a_counterexample_opened_in_chromium_shows_its_partition_owned_twice(tmp_path, rebalance_check):
    config = tmp_path / "assign_twice.toml"
    config.write_text(ASSIGN_TWICE)
    code, summary = rebalance_check(config)
    assert code == 1 and {"name": "exclusive_ownership", "status": "violated"}.items() <= next(
        p for p in summary["properties"] if p["name"] == "exclusive_ownership").items()
    cx = tmp_path / "out" / "exclusive_ownership.json"
    steps = json.loads(cx.read_text())["steps"]
    server = subprocess.Popen([str(REBALANCE), "explore", str(config), "--counterexample", str(cx), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        base = re.search(r"http://127\.0\.0\.1:\d+/", server.stdout.readline()).group(0)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium"), headless=True)
            page = browser.new_page()
            page.goto(base)
            assert page.inner_text("#step") == "step 0" and page.locator("#broken li").count() == 0
            assert all(len(lanes) == 1 for lanes in owners(page).values()) and owners(page)
            # the enabled action the counterexample takes first, then one step back, then it again
            first = page.locator("#actions a.action", has_text=steps[1]["action"]["text"])
            first.click()
            assert page.inner_text("#step") == "step 1"
            page.click("#back")
            assert page.inner_text("#step") == "step 0"
            page.locator("#counterexample a.cx-step").nth(1).click()
            assert page.inner_text("#step") == "step 1" and page.get_attribute("a.cx-step.current", "data-step") == "1"
            page.click("#violating-step")
            assert page.inner_text("#step") == f"step {len(steps) - 1}"
            twice = {p: lanes for p, lanes in owners(page).items() if len(lanes) > 1}
            assert twice == {"t-0": ["A", "B"]}
            assert page.locator("#lanes .partition.twice").all_inner_texts() == ["t-0", "t-0"]
            broken = page.locator("#broken li[data-property='exclusive_ownership']")
            assert "t-0 owned by A1 and B1" in broken.inner_text()
            # the counterexamples' renderer: the violating step drawn red, t-0 in the lanes holding it
            assert page.locator("svg g.violation").count() >= 1
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_counterexample_of_another_configuration_is_refused(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"property": "exclusive_ownership", "reason": "t-0 owned twice",
                                 "steps": [{"step": 0, "action": None, "changes": {"coordinator": {}}}]}))
    for text, why in ((None, "its initial state is not this configuration's"), ("{", "not JSON"),
                      ("[]", "not a counterexample written by `rebalance check`")):
        if text is not None:
            other.write_text(text)
        result = CliRunner().invoke(main, ["explore", "--counterexample", str(other), "--port", "0"])
        assert result.exit_code == 2 and why in result.output, result.output
    result = CliRunner().invoke(main, ["explore", str(other), "--example", "default"])
    assert result.exit_code == 2 and "not both" in result.output


@pytest.mark.parametrize("name", examples.names("check"))
def test_every_shipped_configuration_is_browsed_from_its_initial_state(name):
    """Each protocol's lanes (the classic group's phase and generation, KIP-848's states and
    epochs) on the page, and a step along the first enabled action."""
    page = Page(Explorer(resolve(load_toml(examples.path(name, "check")))), name)
    first = page.render(parse(""))
    assert "<tr data-lane='A'>" in first and "class='action'" in first and "<span id='step'>step 0</span>" in first
    assert "<span id='step'>step 1</span>" in page.render(parse("path=0"))
