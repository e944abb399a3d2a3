"""Entry point: ``compose-model-deployment --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_model_deployment.fn import ModelDeploymentFunction

cli = function_cli(ModelDeploymentFunction)
