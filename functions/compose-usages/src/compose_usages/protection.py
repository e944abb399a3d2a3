"""compose-usages: every namespaced ProviderConfig outlives each Release and Object using it.

Pure logic (routing spec §8.1). One Usage per consumer, because a Usage's ``by`` selector
resolves to a single resource: a shared selector would protect the ProviderConfig against
only one arbitrary consumer.

The desired state it reads is earlier steps' output, and an earlier step that holds what it
observed (compose-serving-stack while its gate is closed, and always for this step's Usages)
carries over whatever the API server returned: any field may be missing or malformed
(issue 21). That is unknown, never a reason to fail the step or to drop a label: what exists is
kept as it is and a warning names the resource and field.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping

from modelplane_common import tolerant
from modelplane_common.naming import child_name
from modelplane_common.plain import JSON
from modelplane_schemas.generated.protection_crossplane_io.v1beta1 import usage

CONSUMER_LABEL = "modelplane.ai/usage-consumer"
CONSUMER_KINDS = {("helm.m.crossplane.io", "Release"), ("kubernetes.m.crossplane.io", "Object")}
_SELECTED = ("spec", "by", "resourceSelector", "matchLabels")


def usage_key(consumer_key: str) -> str:
    return f"usage-pc-{consumer_key}"


@dataclasses.dataclass
class Protection:
    consumers: dict[str, JSON] = dataclasses.field(default_factory=dict)  # relabelled
    usages: dict[str, JSON] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)


def _is_consumer(body: JSON) -> bool:
    group = (tolerant.text(body, "apiVersion") or "").split("/", 1)[0]
    kind = tolerant.text(body, "kind")
    # A namespaced Usage cannot protect a ClusterProviderConfig.
    return (group, kind) in CONSUMER_KINDS and tolerant.text(
        body, "spec", "providerConfigRef", "kind"
    ) == "ProviderConfig"


def _selects(existing: JSON, consumer_key: str) -> bool | None:
    """Whether a desired Usage is the one this step composes for ``consumer_key``; None when
    its selector is there but cannot be read (null or of the wrong type: unknown). A Usage
    without one (``by.resourceRef``, or no ``by``) is someone else's."""
    node: object = existing
    for field in _SELECTED:
        if not isinstance(node, dict):
            return None
        if field not in node:
            return False
        node = node[field]
    if not isinstance(node, dict):
        return None
    return node == {CONSUMER_LABEL: consumer_key}


def _labelled(body: JSON, key: str) -> JSON | None:
    """``body`` with the consumer label, or None when its metadata or labels are malformed (a
    held copy of a damaged observed object: replacing them would lose the labels it has)."""
    consumer = copy.deepcopy(body)
    metadata = consumer.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        return None
    if metadata.get("labels") is None:
        metadata["labels"] = {}
    if not isinstance(metadata["labels"], dict):
        return None
    metadata["labels"][CONSUMER_LABEL] = key
    return consumer


def _carries_label(observed: Mapping[str, JSON], key: str) -> bool:
    return tolerant.text(observed.get(key), "metadata", "labels", CONSUMER_LABEL) == key


def protect(
    xr_name: str,
    xr_namespace: str | None,
    desired: Mapping[str, JSON],
    observed: Mapping[str, JSON] | None = None,
) -> Protection:
    """Labels for each consumer and its Usage of the ProviderConfig it names."""
    out = Protection()
    observed = observed or {}
    if not xr_namespace:
        return out  # a cluster-scoped XR: no namespace to put a Usage in
    # Sorted: protobuf map order differs between processes, and the warnings become events.
    for key in sorted(desired):
        body = desired[key]
        if not _is_consumer(body):
            continue
        new_key = usage_key(key)
        if new_key in desired:
            selects = _selects(desired[new_key], key)
            if selects is False:
                out.warnings.append(f"desired resource {new_key} already exists; not replacing it")
                continue
            if selects is None:
                out.warnings.append(
                    f"desired resource {new_key}: {'.'.join(_SELECTED)} missing or malformed; "
                    "kept as it is"
                )
                if not _carries_label(observed, key):
                    continue  # unknown: the consumer's labels stay as they are
            # Our own Usage, carried over by an earlier step that holds what it observed: the
            # consumer must keep the label it selects, or the ProviderConfig is unprotected.
            _relabel(out, body, key)
            continue
        provider_config = tolerant.text(body, "spec", "providerConfigRef", "name")
        if not provider_config:
            # Nothing to delete: no Usage exists yet. Failing the step would stop the XR.
            out.warnings.append(
                f"desired resource {key}: spec.providerConfigRef.name missing or malformed; "
                "its ProviderConfig is not protected"
            )
            continue
        if not _relabel(out, body, key):
            continue
        api_version, kind = tolerant.text(body, "apiVersion"), tolerant.text(body, "kind")
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
                    kind=kind,
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


def _relabel(out: Protection, body: JSON, key: str) -> bool:
    consumer = _labelled(body, key)
    if consumer is None:
        out.warnings.append(
            f"desired resource {key}: metadata.labels malformed; not labelled for its Usage"
        )
        return False
    out.consumers[key] = consumer
    return True
