"""Example plug-in assignors, shipped with the package: ``--assignor
rebalance.examples.assignors.sticky:assign`` (a cooperative sticky assignor) and
``rebalance.examples.assignors.flawed_sticky:assign`` (the same with a subtle flaw)."""
