"""Entry point: ``compose-eks-cluster --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_eks_cluster.fn import EKSClusterFunction

cli = function_cli(EKSClusterFunction)
