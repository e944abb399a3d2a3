"""Entry point: ``compose-usages --insecure --address HOST:PORT``."""

from modelplane_common.runtime import function_cli

from compose_usages.fn import UsagesFunction

cli = function_cli(UsagesFunction)
