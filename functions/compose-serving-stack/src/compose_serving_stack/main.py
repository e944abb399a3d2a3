"""Entry point: ``compose-serving-stack --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_serving_stack.fn import ServingStackFunction

cli = function_cli(ServingStackFunction)
