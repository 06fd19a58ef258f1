"""rebalance: the formal specification, model checker and reference implementation
of Kafka-style group rebalancing. Subpackages: ``rebalance.model`` (pure
transition model), ``rebalance.checker`` (explicit-state exploration),
``rebalance.impl`` (the shipped implementation), ``rebalance.spec`` (the
specification). The command line is ``rebalance.cli``."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kafka-rebalance")  # setuptools-scm's, from the git tags at install time
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.0.0+unknown"
