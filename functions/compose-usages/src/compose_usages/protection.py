"""compose-usages: every namespaced ProviderConfig outlives each Release and Object using it.

Pure logic (routing spec §8.1). One Usage per consumer, because a Usage's ``by`` selector
resolves to a single resource: a shared selector would protect the ProviderConfig against
only one arbitrary consumer.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping

from modelplane_common.function import InputError
from modelplane_common.naming import child_name
from modelplane_common.plain import JSON
from modelplane_schemas.generated.protection_crossplane_io.v1beta1 import usage

CONSUMER_LABEL = "modelplane.ai/usage-consumer"
CONSUMER_KINDS = {("helm.m.crossplane.io", "Release"), ("kubernetes.m.crossplane.io", "Object")}


def usage_key(consumer_key: str) -> str:
    return f"usage-pc-{consumer_key}"


@dataclasses.dataclass
class Protection:
    consumers: dict[str, JSON] = dataclasses.field(default_factory=dict)  # relabelled
    usages: dict[str, JSON] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)


def _is_consumer(body: JSON) -> bool:
    group = str(body.get("apiVersion", "")).split("/", 1)[0]
    ref = (body.get("spec") or {}).get("providerConfigRef") or {}
    # A namespaced Usage cannot protect a ClusterProviderConfig.
    return (group, body.get("kind")) in CONSUMER_KINDS and ref.get("kind") == "ProviderConfig"


def _selects(existing: JSON, consumer_key: str) -> bool:
    """Whether a desired Usage is the one this step composes for ``consumer_key``."""
    by = (existing.get("spec") or {}).get("by") or {}
    return ((by.get("resourceSelector") or {}).get("matchLabels") or {}) == {
        CONSUMER_LABEL: consumer_key
    }


def protect(xr_name: str, xr_namespace: str | None, desired: Mapping[str, JSON]) -> Protection:
    """Labels for each consumer and its Usage of the ProviderConfig it names."""
    out = Protection()
    if not xr_namespace:
        return out  # a cluster-scoped XR: no namespace to put a Usage in
    # Sorted: protobuf map order differs between processes, and the warnings become events.
    for key in sorted(desired):
        body = desired[key]
        if not _is_consumer(body):
            continue
        provider_config = body["spec"]["providerConfigRef"].get("name")
        if not provider_config:
            # Skipping it would delete its Usage; failing the step deletes nothing.
            raise InputError(
                f"desired resource {key}: spec.providerConfigRef.name is required to protect "
                "its ProviderConfig"
            )
        new_key = usage_key(key)
        consumer = copy.deepcopy(body)
        labels = consumer.setdefault("metadata", {}).setdefault("labels", {})
        labels[CONSUMER_LABEL] = key
        if new_key in desired:
            if not _selects(desired[new_key], key):
                out.warnings.append(f"desired resource {new_key} already exists; not replacing it")
                continue
            # Our own Usage, carried over by an earlier step that holds what it observed: the
            # consumer must keep the label it selects, or the ProviderConfig is unprotected.
            out.consumers[key] = consumer
            continue
        out.consumers[key] = consumer
        api_version = body["apiVersion"]
        out.usages[new_key] = usage.Usage(
            metadata={"name": child_name(xr_name, new_key), "namespace": xr_namespace},
            spec=usage.Spec(
                of=usage.Of(
                    apiVersion=api_version,
                    kind="ProviderConfig",
                    resourceRef=usage.ResourceRef1(name=provider_config),
                ),
                by=usage.By(
                    apiVersion=api_version,
                    kind=body["kind"],
                    resourceSelector=usage.ResourceSelector(
                        matchControllerRef=True, matchLabels={CONSUMER_LABEL: key}
                    ),
                ),
                replayDeletion=True,
            ),
        ).model_dump(mode="json", by_alias=True, exclude_unset=True) | {
            "apiVersion": "protection.crossplane.io/v1beta1",
            "kind": "Usage",
        }
    return out
