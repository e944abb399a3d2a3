"""compose-gke-cluster: the GKECluster composition function."""
