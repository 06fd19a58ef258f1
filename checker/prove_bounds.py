"""The bounds of ``rebalance prove`` (checker/prove.py), kept apart from it so that the
command line reads them for its options without importing z3 (the ``[prove]`` extra)."""

MAX_MEMBERS, MAX_PARTITIONS = 5, 10
COUNTING_PARTITIONS = 6  # balance and minimal moves: z3 needs ~1 s at 5 x 6, ~20 s at 5 x 7, ~70 s at 5 x 8
LIMITS = (8, 16)  # the largest bounds accepted (members, partitions)
PLUGIN_MEMBERS, PLUGIN_PARTITIONS, PLUGIN_GENERATIONS = 3, 4, 2  # --assignor: the exhaustive bound's defaults
PLUGIN_EXAMPLES = 500  # --assignor: hypothesis examples beyond the exhaustive bound
