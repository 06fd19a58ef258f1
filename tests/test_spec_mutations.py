"""Every model-level mutation is named in the specification with its source: spec/SPEC.md's
mutation tables (the classic protocol) or spec/KIP848.md's (the consumer protocol)."""
from pathlib import Path

from rebalance.model.mutations import REGISTRY

SPEC = Path(__file__).resolve().parent.parent / "spec"


def test_every_mutation_is_in_the_spec():
    text = (SPEC / "SPEC.md").read_text() + (SPEC / "KIP848.md").read_text()
    assert [name for name in REGISTRY if f"`{name}`" not in text] == []
