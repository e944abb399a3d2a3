"""compose-model-replica: the ModelReplica composition function."""
