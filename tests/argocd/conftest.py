"""Run the Argo CD health checks of docs/argocd/argocd-cm.yaml the way Argo CD does.

Argo CD runs a health script with gopher-lua (Lua 5.1) with only the base, table, package and a
safe os library loaded, the live object as the global ``obj``, and reads back a table with
``status`` and ``message``. Here the same scripts run on a real Lua 5.1 (lupa) in an
environment holding only the base and table libraries, so a script that reaches for ``string``
or ``math`` (or a string method) fails here as it would in Argo CD.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lupa.lua51 as lua51
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIGMAP = REPO / "docs" / "argocd" / "argocd-cm.yaml"
HEALTH_PREFIX = "resource.customizations.health."
STATUSES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}

_SANDBOX = """
function(source, obj, tablelib)
  local env = {obj = obj, table = tablelib}
  for _, name in ipairs({"assert", "error", "ipairs", "next", "pairs", "pcall", "rawequal",
      "rawget", "rawset", "select", "setmetatable", "getmetatable", "tonumber", "tostring",
      "type", "unpack", "xpcall", "_VERSION"}) do
    env[name] = _G[name]
  end
  local chunk, err = loadstring(source, "=health.lua")
  if chunk == nil then
    error(err)
  end
  setfenv(chunk, env)
  return chunk()
end
"""


@dataclasses.dataclass(frozen=True)
class Health:
    status: str
    message: str


class ArgoHealth:
    """``health(obj)``: what Argo CD shows for ``obj`` with the shipped customization."""

    def __init__(self, configmap: Path = CONFIGMAP) -> None:
        data = yaml.safe_load(configmap.read_text())["data"]
        self.scripts = {
            key.removeprefix(HEALTH_PREFIX): source
            for key, source in data.items()
            if key.startswith(HEALTH_PREFIX)
        }
        self.lua = lua51.LuaRuntime(unpack_returned_tuples=False)
        # Without the string library gopher-lua strings have no methods either.
        self.lua.execute('debug.setmetatable("", nil)')
        self._run = self.lua.eval(_SANDBOX)
        self._table = self.lua.eval("table")

    def script_for(self, obj: Mapping[str, Any]) -> str:
        group = str(obj.get("apiVersion", "")).split("/")[0]
        return self.scripts[f"{group}_{obj.get('kind')}"]

    def __call__(self, obj: Mapping[str, Any]) -> Health:
        lua_obj = self.lua.table_from(dict(obj), recursive=True)
        result = self._run(self.script_for(obj), lua_obj, self._table)
        status, message = result["status"], result["message"]
        assert status in STATUSES, f"{obj.get('kind')}: Argo CD rejects health status {status!r}"
        assert isinstance(message, str) and message, f"{obj.get('kind')}: no message"
        return Health(status, message)


@pytest.fixture(scope="session")
def health() -> ArgoHealth:
    return ArgoHealth()
