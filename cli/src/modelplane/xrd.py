"""The XRDs and Compositions under apis/, and Kubernetes structural defaulting."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from modelplane import repo

JSON = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Definition:
    """One XRD, or a plain CustomResourceDefinition: where it came from and the schema of each
    served version."""

    path: Path
    body: JSON

    @property
    def is_crd(self) -> bool:
        return self.body.get("kind") == "CustomResourceDefinition"

    @property
    def group(self) -> str:
        return self.body["spec"]["group"]

    @property
    def kind(self) -> str:
        return self.body["spec"]["names"]["kind"]

    @property
    def namespaced(self) -> bool:
        # An apiextensions v2 XRD defaults to Namespaced; v1 XRDs are LegacyCluster.
        return self.body["spec"].get("scope", "Namespaced") == "Namespaced"

    def version(self, api_version: str) -> JSON | None:
        """The ``spec.versions`` entry of ``api_version`` (group/version), or None."""
        versions = self.body["spec"]["versions"]
        return next((v for v in versions if f"{self.group}/{v['name']}" == api_version), None)

    def schema(self, api_version: str) -> JSON | None:
        version = self.version(api_version)
        return version["schema"]["openAPIV3Schema"] if version else None


@dataclasses.dataclass(frozen=True)
class Catalog:
    definitions: dict[tuple[str, str], Definition]  # (group, kind) -> XRD or CRD
    compositions: dict[tuple[str, str], list[tuple[Path, JSON]]]  # (apiVersion, kind) -> list

    def definition_for(self, api_version: str, kind: str) -> Definition | None:
        return self.definitions.get((api_version.split("/", maxsplit=1)[0], kind))

    def composition_for(self, api_version: str, kind: str) -> tuple[Path, JSON] | None:
        found = self.compositions.get((api_version, kind), [])
        return found[0] if found else None

    def with_documents(self, documents: Iterable[tuple[Path, Any]]) -> Catalog:
        """This catalog plus the XRDs, CRDs and Compositions among ``documents``; a later one
        overrides an earlier one of the same kind or type. Malformed ones are skipped (the
        validator reports them)."""
        definitions = dict(self.definitions)
        compositions = {key: list(value) for key, value in self.compositions.items()}
        for path, doc in documents:
            if not isinstance(doc, dict):
                continue
            group, kind = str(doc.get("apiVersion", "")).split("/")[0], doc.get("kind")
            try:
                if (group, kind) in _DEFINITION_KINDS:
                    definition = Definition(path, doc)
                    definitions[(definition.group, definition.kind)] = definition
                elif (group, kind) == ("apiextensions.crossplane.io", "Composition"):
                    ref = doc["spec"]["compositeTypeRef"]
                    key = (ref["apiVersion"], ref["kind"])
                    compositions.setdefault(key, []).insert(0, (path, doc))
            except (KeyError, TypeError):
                continue
        return Catalog(definitions, compositions)


_DEFINITION_KINDS = {
    ("apiextensions.crossplane.io", "CompositeResourceDefinition"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
}


def is_definition(doc: Any) -> bool:
    """Whether ``doc`` is an XRD or a CRD (it defines a kind)."""
    if not isinstance(doc, dict):
        return False
    return (str(doc.get("apiVersion", "")).split("/")[0], doc.get("kind")) in _DEFINITION_KINDS


def read_catalog(apis: Path) -> Catalog:
    documents = (
        (path, doc)
        for path in sorted(apis.rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
    )
    return Catalog({}, {}).with_documents(documents)


@cache
def catalog() -> Catalog:
    """The repository's own XRDs and Compositions."""
    return read_catalog(repo.root() / "apis")


def apply_defaults(schema: JSON, value: Any) -> Any:
    """Kubernetes structural defaulting: a copy of ``value`` with schema defaults filled in.

    A missing field (or a null one) whose schema has a default gets a copy of it; the walk goes
    on into objects and array items, defaulted ones included. Parents without defaults are
    never created.
    """
    value = copy.deepcopy(value)
    _default(schema, value)
    return value


def _default(schema: JSON, value: Any) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name, sub in properties.items():
            unset = name not in value or (value[name] is None and not sub.get("nullable"))
            if unset and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _default(sub, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, item in value.items():
                if name not in properties:
                    _default(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(schema["items"], item)
