"""The pytest plugin of ``rebalance.testing`` (registered through the ``pytest11``
entry point ``rebalance``): a ``kafka_cluster`` fixture, a fresh in-process
``rebalance serve`` per test (``rebalance.testing.Cluster``), stopped after it.

Options per test with the ``kafka_cluster`` mark, passed to ``Cluster``::

    @pytest.mark.kafka_cluster(topics={"orders": 6}, subprocess=True)
    def test_my_consumer(kafka_cluster):
        run_my_service(bootstrap=kafka_cluster.bootstrap)
        kafka_cluster.wait_for_stable("my-group", members=2)
"""
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "kafka_cluster(**options): options of the kafka_cluster fixture "
                                       "(rebalance.testing.Cluster's: topics, initial_delay_ms, subprocess, ...)")


@pytest.fixture
def kafka_cluster(request, tmp_path):
    """A running ``rebalance.testing.Cluster`` (its trace in the test's tmp_path)."""
    from rebalance.testing import Cluster

    mark = request.node.get_closest_marker("kafka_cluster")
    options = dict(mark.kwargs) if mark else {}
    options.setdefault("directory", tmp_path)
    with Cluster(**options) as cluster:
        yield cluster
