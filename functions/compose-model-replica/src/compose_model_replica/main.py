"""Entry point: ``compose-model-replica --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_model_replica.fn import ModelReplicaFunction

cli = function_cli(ModelReplicaFunction)
