"""Entry point: ``compose-nebius-cluster --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_nebius_cluster.fn import NebiusClusterFunction

cli = function_cli(NebiusClusterFunction)
