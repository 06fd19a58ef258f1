"""Explicit-state exploration of the model: system composition, properties, counterexamples."""
