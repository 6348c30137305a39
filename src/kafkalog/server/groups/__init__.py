"""The classic group coordinator (:mod:`.coordinator`), its offsets (:mod:`.offsets`) and the
rest of Kafka's GroupMetadataManager for one node: group state, timeouts, loading, describing and
deleting groups."""
