"""Topic compaction the Pulsar way: a compacted copy of each partition beside its untouched log.

The live log keeps its whole history (retention alone removes data). A run of the two-phase compactor
writes the latest record of every key below a horizon into a *side log* next to the partition's
segments and publishes ``(horizon, side log)`` in one atomic metadata write; readers that ask for the
compacted view read the side log below the horizon and the live log from it on.
"""
