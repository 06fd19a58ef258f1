"""The scenario catalogue (tests/catalogue) on the real Apache Kafka 4.4.0 broker and on
``rebalance serve``: CI's named subset. Each run must reach its situation (read off the
recorded trace) and conform on both sides, or diverge only where the scenario names a
documented departure. The whole catalogue runs with ``make catalogue``, which also writes
the side-by-side table (docs/oracle/side-by-side.md)."""
import pytest

from catalogue import scenarios  # noqa: F401  (registers the catalogue)
from catalogue.runner import CATALOGUE, run, settings_of
from catalogue.targets import target

pytestmark = pytest.mark.kafka

# CI's subset: a few minutes on two cores, one of each kind of situation
CI_SUBSET = ["scale_up/confluent-cooperative-sticky", "session_timeout/confluent-range",
             "static_restart/confluent-range-static", "batch_removal/confluent-cooperative-sticky-static",
             "rebalance_timeout/java-cooperative-sticky-static", "static_rolling_bounce/java-cooperative-sticky-static",
             # KIP-848 (group.protocol=consumer, its own broker settings): a member killed, fenced by its session
             "member_crash/confluent-consumer-uniform"]


def _case(name: str):
    scenario, key = name.split("/")
    s = CATALOGUE[scenario]
    return s, next(v for v in s.variants if v.key == key)


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    started: dict = {}

    def get(where: str, settings: dict):
        key = (where, tuple(sorted(settings.items())))
        if key not in started:
            started[key] = target(where, settings, tmp_path_factory.mktemp(where))
        return started[key]
    yield get
    for t in started.values():
        t.close()


def test_ci_subset_names_exist():
    for name in CI_SUBSET:
        _case(name)


@pytest.mark.parametrize("name,where", [(n, w) for n in CI_SUBSET for w in ("kafka", "serve")],
                         ids=[f"{n}-{w}" for n in CI_SUBSET for w in ("kafka", "serve")])
def test_scenario(name, where, targets, tmp_path):
    s, variant = _case(name)
    r = run(s, variant, targets(where, settings_of(s, variant)), tmp_path)
    assert r.error is None, r.error
    assert r.reached, [c for c in r.situation if not c["held"]]
    assert r.conform["clients"]["verdict"] == "conforms", r.conform["clients"]
    assert r.passed, r.conform["coordinator"]


# CI's part of the test doubles' fidelity table (tests/catalogue/fidelity.py, docs/doubles.md): one scenario on the
# real broker, serve, franz-go's kfake and librdkafka's mock cluster; the whole table is `make doubles`
FIDELITY_SUBSET = ["scale_up/confluent-cooperative-sticky"]


def test_fidelity_table_of_the_test_doubles(tmp_path):
    """The fidelity script scores every target on the subset: Kafka and serve conform,
    and each double gets a score in every row (conforms, diverges, or cannot run)."""
    from catalogue.__main__ import main
    from catalogue.fidelity import COLUMNS

    table = tmp_path / "fidelity.md"
    argv = [a for t in COLUMNS for a in ("--target", t)] + [a for n in FIDELITY_SUBSET for a in ("--only", n)]
    assert main(argv + ["--out", str(tmp_path / "runs"), "--fidelity", str(table)]) == 0
    rows = [line.split(" | ") for line in table.read_text().splitlines() if line.startswith("| **")]
    assert len(rows) == len(FIDELITY_SUBSET)
    for cells in rows:
        scores = [c.strip(" |") for c in cells[2:]]
        assert len(scores) == len(COLUMNS), cells
        assert scores[:2] == ["conforms", "conforms"], cells
        assert all(s.split(":")[0] in ("conforms", "diverges", "cannot run") for s in scores[2:]), cells
