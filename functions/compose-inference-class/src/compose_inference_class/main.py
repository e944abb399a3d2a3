"""Entry point: ``compose-inference-class --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_inference_class.fn import InferenceClassFunction

cli = function_cli(InferenceClassFunction)
