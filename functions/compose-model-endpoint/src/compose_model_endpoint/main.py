"""Entry point: ``compose-model-endpoint --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_model_endpoint.fn import ModelEndpointFunction

cli = function_cli(ModelEndpointFunction)
