"""The specification: SPEC.md and its machine-checked parts."""
