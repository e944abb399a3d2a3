"""A small client for a real API server: JSON over HTTPS with the admin token.

Enough for the harness and the judges (apply, dry-run create, get, patch status, wait for a
condition); people use kubectl or any client with the kubeconfig the harness writes.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

# group/version -> plural per kind, learned from discovery on first use
_CORE_PREFIX = "/api/v1"


class ApiError(Exception):
    """An API server answered with a failure Status."""

    def __init__(self, code: int, status: dict[str, Any]) -> None:
        super().__init__(f"{code}: {status.get('message', status)}")
        self.code = code
        self.status = status


class Client:
    def __init__(self, server: str, token: str, ca_file: Path) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.context = ssl.create_default_context(cafile=str(ca_file))
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}

    # ---------------------------------------------------------------------------------------
    # HTTP

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 60,
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=timeout) as answer:
                payload = answer.read()
        except urllib.error.HTTPError as error:
            payload = error.read()
            try:
                status = json.loads(payload)
            except ValueError:
                status = {"message": payload.decode(errors="replace")}
            raise ApiError(error.code, status) from None
        return json.loads(payload) if payload else None

    def ready(self) -> bool:
        try:
            request = urllib.request.Request(self.server + "/readyz")
            request.add_header("Authorization", f"Bearer {self.token}")
            with urllib.request.urlopen(request, context=self.context, timeout=5) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    # ---------------------------------------------------------------------------------------
    # Paths

    def forget_discovery(self) -> None:
        self._resources.clear()

    def _kinds(self, api_version: str) -> dict[str, tuple[str, bool]]:
        """kind -> (plural, namespaced) served at ``api_version``."""
        if api_version not in self._resources:
            prefix = _CORE_PREFIX if api_version == "v1" else f"/apis/{api_version}"
            listing = self.request("GET", prefix)
            self._resources[api_version] = {
                resource["kind"]: (resource["name"], resource["namespaced"])
                for resource in listing["resources"]
                if "/" not in resource["name"]
            }
        return self._resources[api_version]

    def path(self, api_version: str, kind: str, namespace: str | None = None,
             name: str | None = None) -> str:  # fmt: skip
        kinds = self._kinds(api_version)
        if kind not in kinds:
            self._resources.pop(api_version, None)
            kinds = self._kinds(api_version)
        plural, namespaced = kinds[kind]
        prefix = _CORE_PREFIX if api_version == "v1" else f"/apis/{api_version}"
        scope = f"/namespaces/{namespace or 'default'}" if namespaced else ""
        return f"{prefix}{scope}/{plural}" + (f"/{name}" if name else "")

    def object_path(self, obj: dict[str, Any]) -> str:
        metadata = obj.get("metadata") or {}
        return self.path(obj["apiVersion"], obj["kind"], metadata.get("namespace"),
                         metadata.get("name"))  # fmt: skip

    # ---------------------------------------------------------------------------------------
    # Verbs

    def apply(self, obj: dict[str, Any], manager: str = "realplane", dry_run: bool = False,
              force: bool = True, strict: bool = False) -> Any:  # fmt: skip
        """Server-side apply; ``strict`` refuses unknown and duplicate fields, as kubectl's
        default ``--validate=strict`` asks."""
        query = {"fieldManager": manager, "force": "true" if force else "false"}
        if dry_run:
            query["dryRun"] = "All"
        if strict:
            query["fieldValidation"] = "Strict"
        return self.request(
            "PATCH",
            self.object_path(obj) + "?" + urllib.parse.urlencode(query),
            obj,
            content_type="application/apply-patch+yaml",
        )

    def create(self, obj: dict[str, Any], dry_run: bool = False) -> Any:
        metadata = obj.get("metadata") or {}
        path = self.path(obj["apiVersion"], obj["kind"], metadata.get("namespace"))
        query = "?dryRun=All&fieldValidation=Strict" if dry_run else "?fieldValidation=Strict"
        return self.request("POST", path + query, obj)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        return self.request("GET", self.path(api_version, kind, namespace, name))

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[Any]:
        """Objects of ``kind`` in ``namespace``; with none given, in every namespace."""
        path = self.path(api_version, kind, namespace or "-")
        if namespace is None:
            path = path.replace("/namespaces/-/", "/")
        return self.request("GET", path)["items"]

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        try:
            self.request("DELETE", self.path(api_version, kind, namespace, name))
        except ApiError as error:
            if error.code != 404:
                raise

    def patch_status(self, api_version: str, kind: str, name: str, status: dict[str, Any],
                     namespace: str | None = None) -> Any:  # fmt: skip
        return self.request(
            "PATCH",
            self.path(api_version, kind, namespace, name) + "/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return entry
    return None


def is_true(obj: dict[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def wait(what: str, check: Callable[[], Any], timeout: float, every: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy; TimeoutError names ``what``."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (ApiError, OSError, KeyError) as error:
            last_error = error
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}"
                       + (f" (last error: {last_error})" if last_error else ""))  # fmt: skip
