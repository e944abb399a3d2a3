"""Entry point: ``compose-inference-cluster --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_inference_cluster.fn import InferenceClusterFunction

cli = function_cli(InferenceClusterFunction)
