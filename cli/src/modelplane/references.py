"""References between the objects given to `modelplane validate` that name nothing among them.

The API server accepts an object whose referent does not exist yet (Crossplane resolves names
when it composes), so such a reference is never a problem: the referent may already be on the
control plane. It is reported as a warning naming the field, because a typo in a name (an
InferenceCluster's ``className``, a ModelDeployment's ``modelCacheRef``) otherwise shows only
later, as an XR that never becomes ready.

Referents are matched by kind and name; a namespaced referrer's referent is looked up in the
referrer's namespace (``default`` when ``metadata.namespace`` is unset, as ``kubectl apply``
with no namespace in the context does). Cluster-scoped referents are looked up by name only.

Checked:

* InferenceCluster ``spec.nodePools[i].className`` -> InferenceClass;
* ModelDeployment and ModelReplica ``spec.modelCacheRef.name`` -> ModelCache;
* ModelReplica ``spec.clusterName`` -> InferenceCluster;
* ModelService ``spec.endpoints[i].selector.matchLabels`` -> a ModelEndpoint with those labels,
  or, for the labels compose-model-deployment puts on the endpoints it writes, the
  ModelDeployment named by ``modelplane.ai/deployment``.

A ModelService names no InferenceGateway: it uses the one named ``default`` implicitly, so there
is no field to get wrong and nothing is reported for it.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from modelplane_common.naming import CLUSTER_LABEL

from modelplane import xrd
from modelplane.validation import Problem

GROUP = "modelplane.ai"
DEFAULT_NAMESPACE = "default"

# The labels compose-model-deployment writes on each ModelEndpoint it composes
# (compose_model_deployment.names.labels).
DEPLOYMENT_LABEL = "modelplane.ai/deployment"
INDEX_LABEL = "modelplane.ai/replica-index"
COMPOSED_ENDPOINT_LABELS = frozenset({DEPLOYMENT_LABEL, CLUSTER_LABEL, INDEX_LABEL})

# Where a referent lives when the catalog does not say (the scopes of apis/*/definition.yaml).
CLUSTER_SCOPED = frozenset({"InferenceClass", "InferenceCluster", "InferenceGateway"})

_ELSEWHERE = "is not in the files validated (it must exist on the control plane)"


class Source(Protocol):
    """A document of the set (validate.Document): the file it came from, and its body."""

    @property
    def file(self) -> str: ...

    @property
    def body(self) -> Any: ...


@dataclasses.dataclass(frozen=True)
class _Object:
    kind: str
    namespace: str  # "" for a cluster-scoped kind
    name: str
    labels: Mapping[str, str]


class _Index:
    """The Modelplane objects of the set, by kind."""

    def __init__(self, objects: Iterable[_Object]) -> None:
        self.by_kind: dict[str, list[_Object]] = {}
        for obj in objects:
            self.by_kind.setdefault(obj.kind, []).append(obj)

    def has(self, kind: str, namespace: str, name: str) -> bool:
        return any(o.namespace == namespace and o.name == name for o in self.by_kind.get(kind, []))

    def names(self, kind: str, namespace: str) -> list[str]:
        return sorted({o.name for o in self.by_kind.get(kind, []) if o.namespace == namespace})

    def namespaces_of(self, kind: str, name: str) -> list[str]:
        return sorted({o.namespace for o in self.by_kind.get(kind, []) if o.name == name})

    def selects(self, kind: str, namespace: str, labels: Mapping[str, str]) -> bool:
        return any(
            o.namespace == namespace and all(o.labels.get(k) == v for k, v in labels.items())
            for o in self.by_kind.get(kind, [])
        )


def dangling(sources: Iterable[Source], catalog: xrd.Catalog | None = None) -> list[Problem]:
    """A warning for each reference of a Modelplane object in ``sources`` that names nothing
    in ``sources``, in document order. ``catalog`` says which kinds are namespaced."""
    docs = [s for s in sources if _is_modelplane(s.body)]
    scope = _Scope(catalog)
    index = _Index(o for s in docs if (o := _object(s.body, scope)) is not None)
    warnings: list[Problem] = []
    for source in docs:
        referrer = _object(source.body, scope)
        if referrer is None:
            continue
        for path, message in _check(source.body, referrer, index, scope):
            warnings.append(Problem(source.file, referrer.kind, referrer.name, path, message))
    return warnings


class _Scope:
    def __init__(self, catalog: xrd.Catalog | None) -> None:
        self.catalog = catalog

    def namespaced(self, kind: str) -> bool:
        if self.catalog is not None:
            definition = self.catalog.definition_for(f"{GROUP}/v1alpha1", kind)
            if definition is not None:
                try:
                    return definition.namespaced
                except (KeyError, TypeError, AttributeError):
                    pass
        return kind not in CLUSTER_SCOPED

    def namespace(self, kind: str, namespace: str) -> str:
        return namespace if self.namespaced(kind) else ""


def _is_modelplane(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and isinstance(body.get("apiVersion"), str)
        and body["apiVersion"].split("/", maxsplit=1)[0] == GROUP
        and isinstance(body.get("kind"), str)
    )


def _object(body: dict[str, Any], scope: _Scope) -> _Object | None:
    metadata = body.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return None
    namespace = metadata.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        namespace = DEFAULT_NAMESPACE
    labels = metadata.get("labels")
    if not isinstance(labels, dict):
        labels = {}
    kind = body["kind"]
    return _Object(kind, scope.namespace(kind, namespace), metadata["name"], labels)


def _get(body: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(body, dict):
            return None
        body = body.get(key)
    return body


def _items(value: Any) -> Iterator[tuple[int, Any]]:
    if isinstance(value, list):
        yield from enumerate(value)


def _check(
    body: dict[str, Any], referrer: _Object, index: _Index, scope: _Scope
) -> Iterator[tuple[str, str]]:
    """(field path, message) for each dangling reference of one object."""
    by_name: list[tuple[str, str, Any]] = []  # (field path, referent kind, name)
    spec = body.get("spec")
    if referrer.kind == "InferenceCluster":
        for i, pool in _items(_get(spec, "nodePools")):
            by_name.append(
                (f"spec.nodePools[{i}].className", "InferenceClass", _get(pool, "className"))
            )
    if referrer.kind in ("ModelDeployment", "ModelReplica"):
        by_name.append(
            ("spec.modelCacheRef.name", "ModelCache", _get(spec, "modelCacheRef", "name"))
        )
    if referrer.kind == "ModelReplica":
        by_name.append(("spec.clusterName", "InferenceCluster", _get(spec, "clusterName")))
    for path, kind, name in by_name:
        if isinstance(name, str) and name:
            message = _missing(kind, name, referrer, index, scope)
            if message:
                yield path, message
    if referrer.kind == "ModelService":
        for i, entry in _items(_get(spec, "endpoints")):
            labels = _get(entry, "selector", "matchLabels")
            found = _unselected(labels, referrer, index, scope)
            if found:
                suffix, message = found
                yield f"spec.endpoints[{i}].selector.matchLabels{suffix}", message


def _missing(kind: str, name: str, referrer: _Object, index: _Index, scope: _Scope) -> str:
    """Why ``name`` names no ``kind`` for ``referrer``, or "" when it does."""
    namespace = scope.namespace(kind, referrer.namespace)
    if index.has(kind, namespace, name):
        return ""
    where = f" in namespace {namespace}" if namespace else ""
    message = f'{kind} "{name}"{where} {_ELSEWHERE}'
    elsewhere = [n for n in index.namespaces_of(kind, name) if n != namespace]
    if namespace and elsewhere:
        listed = ", ".join(elsewhere)
        return (
            f"{message}; there is one in namespace {listed}, but a {referrer.kind} can only "
            f"use a {kind} in its own namespace"
        )
    close = difflib.get_close_matches(name, index.names(kind, namespace), n=1)
    return f'{message}; did you mean "{close[0]}"?' if close else message


def _unselected(
    labels: Any, referrer: _Object, index: _Index, scope: _Scope
) -> tuple[str, str] | None:
    """(path suffix, message) when a ModelService entry's selector selects nothing in the set."""
    if not isinstance(labels, dict) or not labels:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return None
    namespace = referrer.namespace
    if index.selects("ModelEndpoint", namespace, labels):
        return None
    deployment = labels.get(DEPLOYMENT_LABEL)
    if deployment and set(labels) <= COMPOSED_ENDPOINT_LABELS:
        # The endpoints will be composed by that ModelDeployment, if it is in the set.
        found = _missing("ModelDeployment", deployment, referrer, index, scope)
        if not found:
            return None
        return f"[{DEPLOYMENT_LABEL}]", found
    return "", (
        f"selects no ModelEndpoint in namespace {namespace} in the files validated "
        "(they must exist on the control plane)"
    )
