"""provider-helm Releases and ProviderConfigs (namespaced ``helm.m.crossplane.io/v1beta1``).

Shared by compose-inference-gateway (control-plane releases) and compose-serving-stack
(workload-cluster releases): one place that knows the Release shape and its label contract.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from modelplane_schemas.generated.helm_m_crossplane_io.v1beta1 import providerconfig as hpc
from modelplane_schemas.generated.helm_m_crossplane_io.v1beta1 import release as hr

from modelplane_common.managed import EXTERNAL_NAME


@dataclasses.dataclass(frozen=True)
class Chart:
    """A pinned chart: name, repository (https or oci://) and version."""

    name: str
    repository: str
    version: str


def release(
    chart: Chart,
    namespace: str,
    provider_config: tuple[str, str],
    labels: Mapping[str, str],
    *,
    values: Mapping[str, Any] | None = None,
    name: str,
    metadata_namespace: str | None = None,
    release_name: str | None = None,
) -> hr.Release:
    """A Release of ``chart`` into ``namespace`` through ``provider_config`` (kind, name).

    ``release_name`` (the Helm release name, at most 53 characters) is set through the
    external-name annotation when it differs from the object's ``name``; Usages select the
    Release by ``labels``.
    """
    metadata: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if metadata_namespace is not None:
        metadata["namespace"] = metadata_namespace
    if release_name is not None and release_name != name:
        metadata["annotations"] = {EXTERNAL_NAME: release_name}
    for_provider = hr.ForProvider(
        chart=hr.Chart(name=chart.name, repository=chart.repository, version=chart.version),
        namespace=namespace,
    )
    if values:
        for_provider.values = dict(values)
    kind, name = provider_config
    return hr.Release(
        metadata=metadata,
        spec=hr.Spec(
            forProvider=for_provider,
            providerConfigRef=hr.ProviderConfigRef(kind=kind, name=name),
        ),
    )


def injected_identity_config(name: str, namespace: str) -> hpc.ProviderConfig:
    """A namespaced ProviderConfig for the control plane itself (provider-helm's own identity)."""
    return hpc.ProviderConfig(
        metadata={"name": name, "namespace": namespace},
        spec=hpc.Spec(credentials=hpc.Credentials(source="InjectedIdentity")),
    )
