"""Entry point: ``compose-model-cache --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_model_cache.fn import ModelCacheFunction

cli = function_cli(ModelCacheFunction)
