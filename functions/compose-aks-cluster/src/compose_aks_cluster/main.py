"""Entry point: ``compose-aks-cluster --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_aks_cluster.fn import AKSClusterFunction

cli = function_cli(AKSClusterFunction)
