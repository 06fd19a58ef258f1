"""Kafka as the oracle: the real Apache Kafka 4.4.0, beside the model.

* ``maven``: the Maven project (``pom.xml``) that resolves Kafka's broker, clients,
  Streams and Connect from Maven Central and builds our Java agents (``src/main/java``);
* ``broker``: ``KafkaBroker``, a single-node KRaft broker on loopback (also
  ``rebalance.testing.KafkaBroker``, the ``kafka_broker`` pytest fixture and ``rebalance kafka``).
"""
