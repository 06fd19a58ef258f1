"""The pages written from the catalogue's recorded runs are what their scripts write:
docs/kafka-findings.md's timelines (tests/catalogue/timeline.py) from the Kafka traces
in tests/kafka_traces/."""
import shutil
from pathlib import Path

from catalogue import timeline

ROOT = Path(__file__).resolve().parent.parent


def test_the_findings_timelines_are_the_scripts_output(tmp_path):
    page = ROOT / "docs" / "kafka-findings.md"
    copy = tmp_path / page.name
    shutil.copy(page, copy)
    assert timeline.update(copy) == 3
    assert copy.read_text() == page.read_text(), "run: cd tests && python -m catalogue.timeline --update " \
                                                 "../docs/kafka-findings.md"
