"""Entry point: ``compose-vultr-cluster --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_vultr_cluster.fn import VultrClusterFunction

cli = function_cli(VultrClusterFunction)
