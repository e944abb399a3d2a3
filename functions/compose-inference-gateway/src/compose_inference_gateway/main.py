"""Entry point: ``compose-inference-gateway --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_inference_gateway.fn import InferenceGatewayFunction

cli = function_cli(InferenceGatewayFunction)
