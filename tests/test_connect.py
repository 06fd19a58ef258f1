"""Kafka Connect 4.4.0 on ``rebalance serve`` and on the real Apache Kafka 4.4.0 broker
(tests/catalogue/connect.py, docs/connect.md): CI's subset, a fourth worker joining three
that run a connector with 8 tasks, recorded through ``rebalance proxy``. The run must
reach its situation (W4 in a round, tasks revoked for balance, read off the trace's
decoded Connect protocol), conform on both sides (the members side by the Connect rules,
checker/conform/connect.py), lose no task's records, and its rounds must have the shape
both the model (``--protocol deferred``, seed 000) and its Connect variant
(``--mutation connect-leader-state``) predict from the same starting point. The whole
set of scenarios runs with ``make connect``."""
import pytest

from catalogue.connect import CONNECT, run_connect
from catalogue.targets import played_on


@pytest.mark.parametrize("where", [pytest.param("serve", marks=pytest.mark.interop),
                                   pytest.param("kafka", marks=pytest.mark.kafka)])
def test_a_worker_joins_three_running_eight_tasks(where, tmp_path):
    r = played_on(where, tmp_path, lambda t: run_connect(CONNECT["worker_joins"], t, tmp_path / "run"))
    assert r.error is None, r.error
    assert r.reached, r.situation
    assert r.none_lost, r.records
    assert {side: v["verdict"] for side, v in r.conform.items()} == {"coordinator": "conforms",
                                                                     "members": "conforms"}, r.conform
    assert r.model["matches"] == "seed 000 (the model) and Kafka Connect (connect-leader-state)", r.model
