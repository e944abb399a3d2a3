"""One TLS server answering as every public chart host: Helm repositories and OCI registries.

provider-helm runs where each chart host resolves to 127.0.0.1, so this one server sees every
request its Helm client makes and tells the hosts apart by the ``Host`` header. What it serves
is a ``Catalog`` fixed at start: plain files (a repository's ``index.yaml`` and archives) and
read-only OCI repositories (tags, manifests, blobs) as the distribution API serves them to
anonymous clients. ``charts.py`` fills the catalog; nothing here knows a chart or a host.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import ssl
import sys
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
JSON_TYPE = "application/json"
BLOB_TYPE = "application/octet-stream"

_MANIFEST_OR_BLOB = re.compile(r"^/v2/(?P<repository>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)$")
_TAGS = re.compile(r"^/v2/(?P<repository>.+)/tags/list$")


def sha256(data: bytes) -> str:
    """The OCI digest of ``data`` (``sha256:<hex>``)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _compact(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


@dataclasses.dataclass
class File:
    data: bytes
    media_type: str


@dataclasses.dataclass
class OciRepository:
    """One read-only repository: tag -> manifest digest, the manifests and the blobs."""

    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    manifests: dict[str, bytes] = dataclasses.field(default_factory=dict)
    blobs: dict[str, bytes] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Catalog:
    """Everything the host serves, keyed by the ``Host`` a client sends (no port)."""

    files: dict[tuple[str, str], File] = dataclasses.field(default_factory=dict)
    oci: dict[tuple[str, str], OciRepository] = dataclasses.field(default_factory=dict)

    def find_oci(self, host: str, repository: str) -> OciRepository | None:
        """The repository by host and path; else by path alone, which is unique here: a
        registry's API host may differ from the host its references carry."""
        found = self.oci.get((host, repository))
        if found is None:
            matches = [repo for (_host, path), repo in self.oci.items() if path == repository]
            found = matches[0] if len(matches) == 1 else None
        return found

    def add_file(self, host: str, path: str, data: bytes, media_type: str) -> None:
        self.files[(host.lower(), path)] = File(data, media_type)

    def add_artifact(
        self,
        host: str,
        repository: str,
        tag: str,
        *,
        config: tuple[str, bytes],
        layers: list[tuple[str, bytes]],
        annotations: dict[str, str],
    ) -> str:
        """Store an OCI image manifest (``config`` and ``layers`` as (mediaType, bytes)) under
        ``tag``; its digest."""
        repo = self.oci.setdefault((host.lower(), repository), OciRepository())

        def descriptor(media_type: str, data: bytes) -> dict[str, Any]:
            digest = sha256(data)
            repo.blobs[digest] = data
            return {"mediaType": media_type, "digest": digest, "size": len(data)}

        manifest = _compact({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor(*config),
            "layers": [descriptor(*layer) for layer in layers],
            "annotations": annotations,
        })  # fmt: skip
        digest = sha256(manifest)
        repo.manifests[digest] = manifest
        repo.tags[tag] = digest
        return digest


def _oci_error(code: str, message: str) -> bytes:
    return _compact({"errors": [{"code": code, "message": message, "detail": {}}]})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer carries its Content-Length
    server_version = "modelplane-charthost"
    timeout = 60
    server: _Server

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stdout.write(f"{self.headers.get('Host', '-')} {format % args}\n")
        sys.stdout.flush()

    def _answer(self, *, head: bool) -> None:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
        path = urllib.parse.urlsplit(self.path).path
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        catalog = self.server.catalog
        if path in ("/v2", "/v2/"):
            self._send(200, b"{}", JSON_TYPE, head)
        elif path.startswith("/v2/"):
            self._oci(catalog, host, path, query, head)
        elif (file := catalog.files.get((host, path))) is not None:
            self._send(200, file.data, file.media_type, head)
        else:
            self._send(404, f"{host}{path} not found\n".encode(), "text/plain", head)

    def _oci(self, catalog: Catalog, host: str, path: str, query: dict[str, list[str]],
             head: bool) -> None:  # fmt: skip
        if (match := _TAGS.match(path)) is not None:
            repo = catalog.find_oci(host, match["repository"])
            if repo is None:
                self._send(404, _oci_error("NAME_UNKNOWN", "repository name not known to registry"),
                           JSON_TYPE, head)  # fmt: skip
                return
            tags = sorted(repo.tags)
            if "last" in query:
                tags = [tag for tag in tags if tag > query["last"][0]]
            if "n" in query and query["n"][0].isdigit():
                tags = tags[: int(query["n"][0])]
            body = _compact({"name": match["repository"], "tags": tags})
            self._send(200, body, JSON_TYPE, head)
            return
        match = _MANIFEST_OR_BLOB.match(path)
        repo = catalog.find_oci(host, match["repository"]) if match else None
        if match is None or repo is None:
            self._send(404, _oci_error("NAME_UNKNOWN", "repository name not known to registry"),
                       JSON_TYPE, head)  # fmt: skip
            return
        ref = match["ref"]
        if match["kind"] == "manifests":
            digest = repo.tags.get(ref, ref)
            manifest = repo.manifests.get(digest)
            if manifest is None:
                self._send(404, _oci_error("MANIFEST_UNKNOWN", f"manifest unknown: {ref}"),
                           JSON_TYPE, head)  # fmt: skip
                return
            self._send(200, manifest, OCI_MANIFEST, head, digest)
            return
        blob = repo.blobs.get(ref)
        if blob is None:
            self._send(404, _oci_error("BLOB_UNKNOWN", f"blob unknown: {ref}"), JSON_TYPE, head)
            return
        self._send(200, blob, BLOB_TYPE, head, ref)

    def _send(self, status: int, body: bytes, media_type: str, head: bool,
              digest: str | None = None) -> None:  # fmt: skip
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        if self.path.startswith("/v2"):
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        if digest is not None:
            self.send_header("Docker-Content-Digest", digest)
        self.end_headers()
        if not head:
            self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    """Each connection's TLS handshake happens in its own thread, never in the accept loop."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], catalog: Catalog, context: ssl.SSLContext) -> None:
        self.catalog = catalog
        self.context = context
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            secured = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as error:
            sys.stdout.write(f"TLS handshake with {client_address[0]} failed: {error}\n")
            sys.stdout.flush()
            return
        try:
            super().finish_request(secured, client_address)
        finally:
            secured.close()  # wrapping detached the raw socket: shutdown_request closes nothing


def _context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["http/1.1"])
    return context


class ChartHost:
    """The catalog served over TLS on ``address``:``port`` (port 0: any free one)."""

    def __init__(self, catalog: Catalog, cert: Path, key: Path, address: str = "127.0.0.1",
                 port: int = 443, *, mint: Callable[[str], tuple[Path, Path]] | None = None,
                 ) -> None:  # fmt: skip
        """``mint(name)``, when given, issues a certificate for a server name the handshake
        asks for that ``cert`` does not cover (answering as any host, wildcarddns.py)."""
        context = _context(cert, key)
        if mint is not None:
            minted: dict[str, ssl.SSLContext] = {}
            lock = threading.Lock()

            def choose(connection: ssl.SSLObject, name: str | None, _: ssl.SSLContext) -> None:
                if not name:
                    return
                with lock:
                    if name not in minted:
                        minted[name] = _context(*mint(name))
                connection.context = minted[name]

            context.sni_callback = choose
        self._server = _Server((address, port), catalog, context)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def start(self) -> ChartHost:
        """Serve from a background thread (for tests); ``stop`` ends it."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ChartHost:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
