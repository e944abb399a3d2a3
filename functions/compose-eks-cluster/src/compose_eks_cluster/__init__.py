"""compose-eks-cluster: the EKSCluster composition function."""
