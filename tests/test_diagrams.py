"""Issue 20 item 5: diagrams a reviewer can read (checker/counterexample.py). Every
point is asserted on the SVG graphviz's real ``dot`` renders: ownership per lane,
the violating step and partition highlighted, configuration, protocol and mutation
in the title, heartbeat round trips collapsed, unused lanes dropped, a lasso at
most 1,600 px wide, replays drawn, one self-contained HTML report per run. The
violations come from deliberately wrong or zombie-ridden models (mutations)."""
import json
import re
import stat
import xml.etree.ElementTree as ET

import pytest

from rebalance.checker.counterexample import diagram, svg_of
from rebalance.checker.system import FAULTS, System
from rebalance.model.config import GroupConfig

from conftest import EXAMPLES, ROOT, run_cli

SVG = "{http://www.w3.org/2000/svg}"
ZOMBIE = ("--members", "2", "--partitions", "2", "--faults", "pause,crash,join", "--continue")
STORM = ("--members", "2", "--partitions", "3", "--faults", "join,crash", "--max-faults", "1",
         "--mutation", "keep-revoked", "--continue")


def width_px(svg: str) -> float:
    """The drawing's width in px (96 per inch) from the root's ``width`` attribute (pt)."""
    w = ET.fromstring(svg).get("width")
    assert w.endswith("pt")
    return float(w[:-2]) * 96 / 72


def lanes(svg: str) -> set:
    """The lane headers: the first line of each ``*_h`` node's text."""
    root = ET.fromstring(svg)
    return {g.find(f"{SVG}text").text for g in root.iter(f"{SVG}g")
            if g.get("class", "").startswith("node") and g.find(f"{SVG}title").text.endswith("_h")}


def texts(svg: str) -> str:
    return " ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{SVG}text"))


@pytest.fixture(scope="module")
def zombie(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("zombie")
    code, out, err = run_cli("check", *ZOMBIE, "--out", tmp, cwd=tmp)
    assert code == 0, err  # exclusive_processing broken, as expected with zombies
    return tmp


@pytest.fixture(scope="module")
def storm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("storm")
    code, out, err = run_cli("check", *STORM, "--out", tmp, cwd=tmp)
    assert code == 1, err
    return tmp


def test_violating_step_and_partition_highlighted_with_ownership_per_lane(zombie):
    svg = (zombie / "exclusive_processing.svg").read_text()
    root = ET.fromstring(svg)
    classes = [g.get("class") for g in root.iter(f"{SVG}g")]
    assert "node violation violating-partition" in classes  # the violating step, on the lane holding t-0 twice
    assert "node violating-partition" in classes  # the zombie's lane: t-0 there too
    red = [t.text for t in root.iter(f"{SVG}text") if t.get("fill") == "red"]
    assert red and set(red) == {"t-0"}  # the partition the reason names, and only it
    words = texts(svg)
    assert "owns [t-0] · assigned [t-0]" in words and "owns [t-1] · assigned [t-1]" in words  # at the start
    assert "owns [t-1] · assigned [t-0, t-1]" in words  # after the step that changed B's assignment


def test_title_names_configuration_protocol_and_mutation(zombie, storm):
    title = texts((zombie / "exclusive_processing.svg").read_text())
    assert "exclusive_processing violated: t-0 owned by A1 and B1" in title
    assert "protocol cooperative (cooperative-sticky)" in title and "2 members + 1 joiner(s)" in title
    assert "faults pause,crash,join (budget 2)" in title and "no mutation" in title
    assert "mutation keep-revoked" in texts((storm / "no_rebalance_storm.svg").read_text())


def test_unused_lanes_dropped(zombie):
    assert lanes((zombie / "exclusive_processing.svg").read_text()) == {"coordinator", "A", "B"}  # C never joins


def test_lasso_drawn_compactly_within_1600_px(storm):
    svg = (storm / "no_rebalance_storm.svg").read_text()
    assert width_px(svg) <= 1600
    assert lanes(svg) == {"loop", "coordinator", "A", "B", "C"}
    classes = [g.get("class") for g in ET.fromstring(svg).iter(f"{SVG}g")]
    assert "edge loop" in classes and "node loop" in classes and "back to 13" in texts(svg)
    for f in storm.glob("*.svg"):
        assert width_px(f.read_text()) <= 1600, f


def test_heartbeat_round_trips_that_change_nothing_collapse():
    system = System(GroupConfig(topics=(("t", 2),)), 2, 1, FAULTS, 1)
    path, state = [(None, system.initial())], system.initial()
    for kind, slot in (("join", 2), ("deliver", 2), ("heartbeat", 0), ("deliver", 0), ("reply", 0), ("deliver", 0)):
        action, state = next((a, n) for a, n in system.successors(state) if a.kind == kind and a.slot == slot)
        path.append((action, state))
    svg = svg_of(diagram(system.cfg, path, "heartbeats")).decode()
    words = texts(svg)
    assert "3-5. heartbeat round trip: REBALANCE_IN_PROGRESS" in words and "Heartbeat(A1" not in words
    assert "6. JoinGroup(A1, owns [t-0]@1)" in words
    edges = [g.find(f"{SVG}title").text for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("class") == "edge"]
    assert "A_3&#45;&gt;coordinator_4" in edges or "A_3->coordinator_4" in edges  # the rejoin, from the trip's row


def test_one_self_contained_html_report_per_run(storm):
    report = storm / "report.html"
    page = report.read_text()
    assert page.count("<svg") == 3 and "<h3>Final state</h3>" in page  # one section per counterexample
    assert page.count("<tr class='loop'>") >= 12 and "<td>coordinator &lt;- A: JoinGroup(A1, owns [t-0, t-2]@1)" in page
    assert not re.search(r"(src|href)=\"(?!#)", page)  # nothing loaded from elsewhere
    assert stat.S_IMODE(report.stat().st_mode) & 0o044 == 0o044  # readable by others (a CI uploader)


def test_replay_svg_renders_a_happy_path(tmp_path):
    code, out, err = run_cli("replay", EXAMPLES / "design1_member_joins.toml", "--svg", tmp_path / "d" / "joins.svg")
    assert code == 0, err
    svg = (tmp_path / "d" / "joins.svg").read_text()
    assert lanes(svg) == {"coordinator", "A", "B", "C", "D"} and width_px(svg) <= 1600
    assert "replay: Design I: member joins" in texts(svg) and "violation" not in svg
    assert "<svg" in (tmp_path / "d" / "joins.html").read_text()
    code, out, err = run_cli("replay", EXAMPLES / "design1_member_joins.toml", "--svg", "/dev/null/x.svg")
    assert code == 2 and "--svg /dev/null/x.svg: cannot write there" in err and "Traceback" not in err


def test_the_docs_show_a_counterexample_png_rendered_by_dot():
    png = ROOT / "docs" / "img" / "exclusive_processing.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "../img/exclusive_processing.png" in (ROOT / "docs" / "explanation" / "main-job.md").read_text()


def test_walks_write_the_report_too(tmp_path):
    code, out, err = run_cli("check", "--members", "4", "--partitions", "8", "--max-faults", "50", "--mutation",
                             "assign-before-revoke", "--walks", "50", "--depth", "300", "--json", "--out", tmp_path,
                             cwd=tmp_path)
    assert code == 1, err
    files = json.loads(out)["counterexample"]["files"]
    page = (tmp_path / "report.html").read_text()
    assert files["html"] == str(tmp_path / "report.html") and page.count("<svg") == 1 and "walks 50" in page
