"""compose-nebius-cluster: the NebiusCluster composition function."""
