"""Entry point: ``compose-model-service --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_model_service.fn import ModelServiceFunction

cli = function_cli(ModelServiceFunction)
