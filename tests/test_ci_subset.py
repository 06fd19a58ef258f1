"""CI's named subset of the slow suite (.ci/slow, run by .ci/run) names tests that exist: a test
renamed or removed fails here, in the default suite, rather than as pytest's "not found" in CI."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def subset(name: str) -> list[str]:
    lines = (ROOT / ".ci" / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_every_node_id_of_the_slow_subset_names_a_slow_test():
    ids = subset("slow")
    assert ids
    for node in ids:
        path, _, rest = node.partition("::")
        function = re.match(r"\w+", rest).group(0)
        source = (ROOT / path).read_text()
        assert re.search(rf"^def {function}\(", source, re.M), f"{node}: no such test"
        assert "pytest.mark.slow" in source, f"{node}: not in a file of slow tests"
