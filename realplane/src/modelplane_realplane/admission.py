"""Every repository object judged by the real API server and by ``modelplane validate``.

Each object under ``apis/``, ``examples/`` and ``docs/manifests/`` is sent to the plane's
kube-apiserver as ``kubectl apply --server-side --dry-run=server --validate=strict`` would send
it, once the kinds it needs exist: Modelplane's XRDs (installed by Crossplane, so their CRDs
are the ones Crossplane generates), the composed kinds' CRDs Modelplane ships, and every
namespace the objects name. ``modelplane validate`` judges the same documents as one set. Two
verdicts agree when both accept, or both refuse naming the same fields.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from modelplane import validate as validating
from modelplane.validate import Document

from modelplane_realplane.crds import shipped_crds
from modelplane_realplane.kubeapi import ApiError, Client, is_true, wait
from modelplane_realplane.paths import REPOSITORY

SOURCES = ("apis", "examples", "docs/manifests")
# Crossplane core's own kinds come from the built core, not from the copies Modelplane ships.
CORE_GROUPS = ("apiextensions.crossplane.io", "pkg.crossplane.io", "ops.crossplane.io",
               "protection.crossplane.io")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Verdict:
    accepted: bool
    fields: frozenset[str]  # the field paths a refusal names
    message: str = ""


@dataclasses.dataclass(frozen=True)
class Judged:
    source: str  # file:line
    kind: str
    name: str
    server: Verdict
    modelplane: Verdict

    @property
    def agree(self) -> bool:
        if self.server.accepted != self.modelplane.accepted:
            return False
        return self.server.accepted or self.server.fields == self.modelplane.fields

    def describe(self) -> str:
        def show(v: Verdict) -> str:
            return "accepts" if v.accepted else f"refuses {sorted(v.fields)}: {v.message[:300]}"

        return (f"{self.source} {self.kind}/{self.name}: the API server "
                f"{show(self.server)}; modelplane validate {show(self.modelplane)}")  # fmt: skip


def repository_documents() -> list[Document]:
    documents = []
    for file in validating.manifest_files([REPOSITORY / source for source in SOURCES]):
        found, errors = validating.read_documents(file)
        if errors:
            raise ValueError(f"unreadable manifest: {errors[0]}")
        documents.extend(found)
    return documents


def prepare(client: Client, documents: list[Document]) -> None:
    """Install what the objects need: composed-kind CRDs and every namespace they name."""
    existing = {c["metadata"]["name"] for c in
                client.list("apiextensions.k8s.io/v1", "CustomResourceDefinition")}  # fmt: skip
    added = []
    for crd in shipped_crds(skip_groups=CORE_GROUPS):
        if crd["metadata"]["name"] not in existing:
            client.apply(crd)
            added.append(crd["metadata"]["name"])
    for name in added:
        wait(f"CRD {name} Established", lambda name=name: is_true(
            client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name),
            "Established"), 60)  # fmt: skip
    client.forget_discovery()
    namespaces = {
        (doc.body.get("metadata") or {}).get("namespace")
        for doc in documents
        if isinstance(doc.body, dict)
    } | {
        (doc.body.get("metadata") or {}).get("name")
        for doc in documents
        if isinstance(doc.body, dict) and doc.body.get("kind") == "Namespace"
    }
    for namespace in sorted(n for n in namespaces if isinstance(n, str) and n):
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


_CAUSE_PREFIX = re.compile(r"^(?:\.)?")


def server_verdict(client: Client, body: dict[str, Any]) -> Verdict:
    """The API server's answer to ``kubectl apply --server-side --dry-run=server``."""
    try:
        client.apply(body, manager="kubectl", dry_run=True, strict=True)
    except ApiError as error:
        details = error.status.get("details") or {}
        fields = frozenset(
            _normal_field(cause.get("field", "")) for cause in details.get("causes") or []
        )
        return Verdict(False, fields, str(error.status.get("message", "")))
    except KeyError as error:
        return Verdict(False, frozenset({""}), f"the server does not serve this kind: {error}")
    return Verdict(True, frozenset())


def modelplane_verdicts(documents: list[Document]) -> list[Verdict]:
    verdicts = []
    for problems in validating.check_documents(documents):
        fields = frozenset(_normal_field(p.path) for p in problems)
        message = "; ".join(p.message for p in problems)
        verdicts.append(Verdict(not problems, fields, message))
    return verdicts


def _normal_field(path: str) -> str:
    """One spelling for a field path: the server's ``spec.a[0].b`` (no leading dot)."""
    return _CAUSE_PREFIX.sub("", path.strip())


def judge(client: Client) -> list[Judged]:
    documents = repository_documents()
    prepare(client, documents)
    judged = []
    for doc, mine in zip(documents, modelplane_verdicts(documents), strict=True):
        body = doc.body if isinstance(doc.body, dict) else {}
        metadata = body.get("metadata") or {}
        judged.append(Judged(
            source=f"{doc.file}:{doc.line}",
            kind=str(body.get("kind", "?")),
            name=str(metadata.get("name", "?")),
            server=server_verdict(client, body),
            modelplane=mine,
        ))  # fmt: skip
    return judged
