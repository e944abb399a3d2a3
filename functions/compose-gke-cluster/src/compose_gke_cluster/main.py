"""Entry point: ``compose-gke-cluster --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_gke_cluster.fn import GKEClusterFunction

cli = function_cli(GKEClusterFunction)
