"""rebalance: the formal specification, model checker and reference implementation
of Kafka-style group rebalancing. Subpackages: ``rebalance.model`` (pure
transition model), ``rebalance.checker`` (explicit-state exploration),
``rebalance.impl`` (the shipped implementation), ``rebalance.spec`` (the
specification). The command line is ``rebalance.cli``."""

__version__ = "0.1.0"
