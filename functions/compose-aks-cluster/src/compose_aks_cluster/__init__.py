"""compose-aks-cluster: the AKSCluster composition function."""
