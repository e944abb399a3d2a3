"""Components a workload cluster may already run (ServingStack ``spec.installed``).

Pure. A component declared installed is not installed by the stack: what would install it
(its Releases, its Objects) is left out, and one provider-kubernetes ``Object`` per proof,
``managementPolicies: [Observe]``, reads the resource that shows the component is there. Such
an Object never creates, updates or deletes anything on the cluster.

A Release or Object the stack composed before the component was declared installed is kept,
switched to Observe only: dropping it would make provider-helm uninstall the chart (and, for
cert-manager, delete its CRDs with every Certificate), and Observe without Delete means the
component also survives the stack's own deletion (design/platform.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Literal

import pydantic
from modelplane_common import tolerant
from modelplane_common.function import as_manifest
from modelplane_common.managed import OBSERVE_NOT_FOUND
from modelplane_common.observed import condition, is_ready
from modelplane_common.plain import JSON

from compose_serving_stack import amd_driver

CRD_API = "apiextensions.k8s.io/v1"
DEVICE_CLASS_API = "resource.k8s.io/v1"
OBSERVE_ONLY = ["Observe"]
KEY_PREFIX = "installed-"

Verdict = Literal["present", "absent"]


@dataclasses.dataclass(frozen=True)
class Proof:
    """A cluster-scoped resource whose presence shows a component is installed."""

    api_version: str
    kind: str
    name: str

    @property
    def key(self) -> str:
        tag = "crd" if self.kind == "CustomResourceDefinition" else self.kind.lower()
        return f"{KEY_PREFIX}{tag}-{self.name}"

    def manifest(self) -> JSON:
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": {"name": self.name}}

    def describe(self) -> str:
        return f"{self.kind} {self.name}"


def _crd(name: str) -> Proof:
    return Proof(CRD_API, "CustomResourceDefinition", name)


@dataclasses.dataclass(frozen=True)
class Component:
    name: str  # the enum value of spec.installed.components
    releases: frozenset[str]  # keys of the Releases that install it
    proofs: tuple[Proof, ...]


def _component(name: str, releases: Iterable[str], *proofs: Proof) -> Component:
    return Component(name, frozenset(releases), proofs)


# One proof per component is enough to tell "installed" from "absent"; the Inference Extension
# has two because the endpoint picker reads both InferencePools and InferenceObjectives.
COMPONENTS: tuple[Component, ...] = (
    _component("certManager", ["cert-manager"], _crd("certificates.cert-manager.io")),
    _component("envoyGateway", ["envoy-gateway"], _crd("envoyproxies.gateway.envoyproxy.io")),
    _component(
        "aiGateway",
        ["ai-gateway-crds", "ai-gateway"],
        _crd("aigatewayroutes.aigateway.envoyproxy.io"),
    ),
    _component("prometheus", ["prometheus"], _crd("podmonitors.monitoring.coreos.com")),
    _component(
        "leaderWorkerSet", ["leader-worker-set"], _crd("leaderworkersets.leaderworkerset.x-k8s.io")
    ),
    _component(
        "nodeFeatureDiscovery", ["node-feature-discovery"], _crd("nodefeaturerules.nfd.k8s-sigs.io")
    ),
    # Each DRA driver publishes its DeviceClass; the pods' ResourceClaims name it.
    _component(
        "nvidiaDraDriver",
        ["dra-driver"],
        Proof(DEVICE_CLASS_API, "DeviceClass", amd_driver.NVIDIA_DRIVER),
    ),
    _component(
        "amdDraDriver",
        [amd_driver.KEY_AMD_DRA_DRIVER],
        Proof(DEVICE_CLASS_API, "DeviceClass", amd_driver.AMD_DRIVER),
    ),
    _component(
        "inferenceExtension",
        [],
        _crd("inferencepools.inference.networking.k8s.io"),
        _crd("inferenceobjectives.inference.networking.x-k8s.io"),
    ),
)
BY_NAME: Mapping[str, Component] = {c.name: c for c in COMPONENTS}
# The DRA driver (spec.draDrivers) each driver component stands for.
DRA_DRIVER_OF: Mapping[str, str] = {
    "nvidiaDraDriver": amd_driver.NVIDIA_DRIVER,
    "amdDraDriver": amd_driver.AMD_DRIVER,
}


def installed(
    all_: bool | None, names: Iterable[str] | None, drivers: frozenset[str]
) -> tuple[Component, ...]:
    """The components declared installed, in COMPONENTS order.

    A DRA driver the stack does not need (not in ``drivers``, its ``spec.draDrivers``) is
    left out, declared or covered by ``all``: nothing would install it, and its absence
    is no fault (an NVIDIA-only cluster with ``all: true`` lacks AMD's DeviceClass).
    """
    wanted = set(names or ())
    return tuple(
        c
        for c in COMPONENTS
        if (all_ or c.name in wanted) and DRA_DRIVER_OF.get(c.name, "") in drivers | {""}
    )


def hands_off(body: JSON | pydantic.BaseModel) -> JSON:
    """``body`` (a Release or Object the stack composed earlier) made Observe only."""
    kept = dict(as_manifest(body))
    kept["spec"] = {**(kept.get("spec") or {}), "managementPolicies": list(OBSERVE_ONLY)}
    return kept


def verdict(observed: JSON | None) -> Verdict | None:
    """What an Observe-only Object last saw: present, absent, or None while not yet known.

    Absence is read from Synced, not Ready: crossplane-runtime reports a vanished resource as
    ``Synced=False`` with OBSERVE_NOT_FOUND and leaves the last Ready condition as it was.
    """
    if observed is None:
        return None
    synced = condition(observed, "Synced") or {}
    if synced.get("status") == "False" and OBSERVE_NOT_FOUND in str(synced.get("message", "")):
        return "absent"
    if is_ready(observed) and tolerant.mapping(observed, "status", "atProvider", "manifest"):
        return "present"
    return None


def missing(
    components: Iterable[Component], observed: Mapping[str, JSON]
) -> list[tuple[Component, Proof]]:
    """Every (component, proof) whose Observe-only Object reports the proof absent."""
    return [
        (component, proof)
        for component in components
        for proof in component.proofs
        if verdict(observed.get(proof.key)) == "absent"
    ]


def missing_message(absent: list[tuple[Component, Proof]]) -> str:
    listed = ", ".join(f"{c.name} ({p.describe()} not found)" for c, p in absent)
    them = "it" if len({c.name for c, _ in absent}) == 1 else "them"
    return (
        f"the workload cluster lacks {listed}, which spec.installed declares installed: "
        f"install {them} there, or take {them} off spec.installed so Modelplane installs {them}"
    )
