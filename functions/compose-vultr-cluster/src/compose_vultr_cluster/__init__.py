"""compose-vultr-cluster: the VultrCluster composition function."""
