"""Node pools from InferenceClasses: resolution, published capacity, cloud pool specs.

Pure logic over the generated models. A pool's class is either resolved, missing (Crossplane
answered the requirement with nothing), unresolved (the requirement has not been answered
yet) or invalid; a pool whose class is not resolved is held back alone (unavailable_pools).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal

import pydantic
from modelplane_common import tolerant
from modelplane_common.function import validation_summary
from modelplane_common.plain import JSON
from modelplane_common.semver import bad_version_attributes
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import akscluster as aks
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import ekscluster as eks
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import gkecluster as gke
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import (
    nebiuscluster as nebius,
)
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import (
    vultrcluster as vultr,
)
from modelplane_schemas.generated.modelplane_ai.v1alpha1 import inferencecluster as ic
from modelplane_schemas.generated.modelplane_ai.v1alpha1.inferenceclass import InferenceClass

Cloud = Literal["GKE", "EKS", "AKS", "Vultr", "Nebius"]


def class_requirement(class_name: str) -> str:
    """The required-resource key for one InferenceClass (spec §4.4)."""
    return f"class-{class_name}"


def class_names(pools: Sequence[ic.NodePool]) -> list[str]:
    """Distinct class names, sorted, so requirements are stable between calls."""
    return sorted({pool.className for pool in pools})


@dataclasses.dataclass
class Classes:
    """The outcome of resolving every referenced class."""

    resolved: dict[str, InferenceClass] = dataclasses.field(default_factory=dict)
    missing: list[str] = dataclasses.field(default_factory=list)
    unresolved: list[str] = dataclasses.field(default_factory=list)
    invalid: dict[str, str] = dataclasses.field(default_factory=dict)  # class -> problem

    @property
    def complete(self) -> bool:
        return not (self.missing or self.unresolved or self.invalid)


def resolve_classes(names: Sequence[str], required: Mapping[str, list[JSON] | None]) -> Classes:
    """Sort each class into resolved, missing, unresolved or invalid.

    ``required`` maps a requirement key to the objects Crossplane returned, or None when the
    key was absent from the request (not asked for yet: never the same as "does not exist").
    """
    classes = Classes()
    for name in names:
        found = required.get(class_requirement(name))
        if found is None:
            classes.unresolved.append(name)
            continue
        match = [obj for obj in found if tolerant.name_of(obj) == name]
        if not match:
            classes.missing.append(name)
            continue
        try:
            classes.resolved[name] = InferenceClass.model_validate(match[0])
        except pydantic.ValidationError as err:
            classes.invalid[name] = validation_summary(err)
            continue
        # Stored before the XRD checked semver: its pools would silently never match.
        bad = bad_version_attributes((match[0].get("spec") or {}).get("devices") or [])
        if bad:
            del classes.resolved[name]
            classes.invalid[name] = "; ".join(f"spec.{problem}" for problem in bad)
    return classes


def pools_by_class(pools: Sequence[ic.NodePool], names: Sequence[str]) -> str:
    """``pool a (class x), pool b (class y)`` for the pools that use any of ``names``."""
    wanted = set(names)
    return ", ".join(f"pool {p.name} (class {p.className})" for p in pools if p.className in wanted)


def gpu_pools(pools: Sequence[ic.NodePool], classes: Mapping[str, InferenceClass]) -> list[JSON]:
    """``status.gpuPools``: one entry per pool whose class resolved with devices, in spec order.

    ``nodes`` is the pool's current size (``nodeCount``), never its autoscaling maximum, which
    is published separately as ``maxNodes`` (decisions D5; design/capacity.md).
    """
    published: list[JSON] = []
    for pool in pools:
        found = classes.get(pool.className)
        if found is None or not found.spec.devices:
            continue
        entry = ic.GpuPool(
            name=pool.name,
            nodes=pool.nodeCount if pool.nodeCount is not None else 1,
            maxNodes=pool.maxNodeCount,
            # Defaults applied (claim DRA, count 1): a reader floors a missing count to 0.
            devices=[
                ic.Device.model_validate(d.model_dump(by_alias=True, exclude_none=True))
                for d in found.spec.devices
            ],
        )
        published.append(entry.model_dump(mode="json", by_alias=True, exclude_none=True))
    return published


# The DRA drivers a ServingStack can install (its spec.draDrivers), sorted.
STACK_DRA_DRIVERS = ("gpu.amd.com", "gpu.nvidia.com")
AMD_DRA_DRIVER = "gpu.amd.com"


def dra_drivers(
    pools: Sequence[ic.NodePool], classes: Mapping[str, InferenceClass], kept: Sequence[object]
) -> list[str] | None:
    """The ServingStack's ``spec.draDrivers``: None (NVIDIA's driver alone, the stack's
    default) unless a pool's class has AMD devices; then every driver the stack can install
    that the pools' DRA devices name. ``kept`` (the observed stack's list while some pool is
    unavailable) stays, so a class gone missing never uninstalls the driver its nodes use."""
    named = {
        device.driver
        for pool in pools
        if (found := classes.get(pool.className)) is not None
        for device in found.spec.devices or []
        if (device.claim or "DRA") == "DRA"
    }
    named |= {d for d in kept if isinstance(d, str)}
    if AMD_DRA_DRIVER not in named:
        return None
    return [d for d in STACK_DRA_DRIVERS if d in named]


def unavailable_pools(
    pools: Sequence[ic.NodePool], classes: Classes, source: str
) -> dict[str, str]:
    """pool name -> why it cannot be resolved (its class missing, unresolved or invalid, or
    not provisionable on the cluster's cloud). Only these pools are held back (issue 21)."""
    bad: dict[str, str] = {}
    for pool in pools:
        name = pool.className
        if name in classes.missing:
            bad[pool.name] = f"InferenceClass {name} not found"
        elif name in classes.unresolved:
            bad[pool.name] = f"InferenceClass {name} not resolved yet"
        elif name in classes.invalid:
            bad[pool.name] = f"InferenceClass {name} is invalid: {classes.invalid[name]}"
    if source in ("GKE", "EKS", "AKS", "Vultr", "Nebius"):
        resolved = [p for p in pools if p.name not in bad]
        for pool, problem in zip(
            resolved, _pool_provisioning(resolved, classes.resolved, source), strict=True
        ):
            if problem:
                bad[pool.name] = problem
    return bad


def carried_pools(observed_cloud: Mapping | None, names: set[str], model: type) -> list:
    """The observed cloud XR's entries for pools that cannot be resolved now: kept exactly
    as they run, so a typo in one pool never resizes or deletes it."""
    carried = []
    for entry in tolerant.maps(observed_cloud, "spec", "nodePools"):
        if entry.get("name") in names:
            try:
                carried.append(model.model_validate(entry))
            except pydantic.ValidationError:
                continue  # unreadable: the cloud XR is not ours to repair
    return carried


def _pool_provisioning(
    pools: Sequence[ic.NodePool], classes: Mapping[str, InferenceClass], cloud: str
) -> list[str]:
    problems = []
    for pool in pools:
        spec = classes[pool.className].spec
        block = None
        if spec.provisioning is not None and spec.provisioning.provider == cloud:
            block = getattr(spec.provisioning, cloud.lower())
        if block is None:
            problems.append(f"InferenceClass {pool.className} has no {cloud} provisioning block")
        elif cloud in NO_AMD_GPUS and has_amd_devices(classes[pool.className]):
            problems.append(
                f"InferenceClass {pool.className} has AMD devices (driver {AMD_DRA_DRIVER}) and "
                f"{cloud} offers no AMD GPUs: provision the pool on AKS (ND MI300X v5) or "
                "adopt its nodes in an Existing cluster"
            )
        elif cloud == "Nebius" and not block.preset.startswith(f"{block.accelerator.count}gpu-"):
            # A Nebius preset fixes a node's GPUs (8gpu-128vcpu-1600gb: eight).
            problems.append(
                f"InferenceClass {pool.className}: provisioning.nebius.preset {block.preset} does "
                f"not have accelerator.count {block.accelerator.count} GPUs "
                f"(a preset starting {block.accelerator.count}gpu-)"
            )
        else:
            problems.append("")
    return problems


# Clouds without AMD GPU machines: an AMD class provisioned there is refused, by pool.
NO_AMD_GPUS = ("GKE", "EKS", "Nebius")


def has_amd_devices(found: InferenceClass) -> bool:
    """Whether a class's nodes are AMD's: one of its devices is published by gpu.amd.com."""
    return any(device.driver == AMD_DRA_DRIVER for device in found.spec.devices or [])


def _sizes(pool: ic.NodePool) -> JSON:
    """nodeCount always; min/max only when the user set them (the cloud XR defaults the rest)."""
    sizes: JSON = {"nodeCount": pool.nodeCount if pool.nodeCount is not None else 1}
    if pool.minNodeCount is not None:
        sizes["minNodeCount"] = pool.minNodeCount
    if pool.maxNodeCount is not None:
        sizes["maxNodeCount"] = pool.maxNodeCount
    return sizes


def _zones(pool: ic.NodePool) -> list[str] | None:
    return [z.root for z in pool.zones] if pool.zones else None


def gke_pools(
    pools: Sequence[ic.NodePool], classes: Mapping[str, InferenceClass]
) -> list[gke.NodePool]:
    """GKECluster ``spec.nodePools`` (spec §4.5): GPU pools only; the system pool is injected."""
    out = []
    for pool in pools:
        provisioning = classes[pool.className].spec.provisioning
        block = provisioning.gke if provisioning else None
        assert block is not None  # unavailable_pools holds back pools without one
        fields: JSON = {
            "name": pool.name,
            "role": "GPU",
            "machineType": block.machineType,
            "diskSizeGb": block.diskSizeGb if block.diskSizeGb is not None else 100,
            **_sizes(pool),
            "gpu": gke.Gpu(
                acceleratorType=block.accelerator.type,
                acceleratorCount=block.accelerator.count,
            ),
        }
        if (zones := _zones(pool)) is not None:
            fields["zones"] = zones
        out.append(gke.NodePool(**fields))
    return out


def eks_pools(
    pools: Sequence[ic.NodePool], classes: Mapping[str, InferenceClass]
) -> list[eks.NodePool]:
    """EKSCluster ``spec.nodePools`` (spec §4.5, EKS)."""
    out = []
    for pool in pools:
        provisioning = classes[pool.className].spec.provisioning
        block = provisioning.eks if provisioning else None
        assert block is not None  # unavailable_pools holds back pools without one
        fields: JSON = {
            "name": pool.name,
            "role": "GPU",
            "instanceType": block.instanceType,
            "diskSizeGb": block.diskSizeGb if block.diskSizeGb is not None else 100,
            **_sizes(pool),
            "gpu": eks.Gpu(acceleratorType=block.accelerator.type),
        }
        if (zones := _zones(pool)) is not None:
            fields["zones"] = zones
        out.append(eks.NodePool(**fields))
    return out


def aks_pools(
    pools: Sequence[ic.NodePool], classes: Mapping[str, InferenceClass]
) -> list[aks.NodePool]:
    """AKSCluster ``spec.nodePools``: the VM size from the class, sizes from the pool."""
    out = []
    for pool in pools:
        provisioning = classes[pool.className].spec.provisioning
        block = provisioning.aks if provisioning else None
        assert block is not None  # unavailable_pools holds back pools without one
        fields: JSON = {
            "name": pool.name,
            "role": "GPU",
            "vmSize": block.vmSize,
            "diskSizeGb": block.diskSizeGb if block.diskSizeGb is not None else 128,
            **_sizes(pool),
            "gpu": aks.Gpu(acceleratorType=block.accelerator.type),
        }
        if has_amd_devices(classes[pool.className]):
            # ND MI300X v5: AMD's taint, no NVIDIA driver (design/amd-gpus.md). NVIDIA pools
            # keep the XRD's default, so their AKSCluster spec is unchanged.
            fields["gpu"].vendor = "AMD"
        if (zones := _zones(pool)) is not None:
            fields["zones"] = zones
        out.append(aks.NodePool(**fields))
    return out


def vultr_pools(
    pools: Sequence[ic.NodePool], classes: Mapping[str, InferenceClass]
) -> list[vultr.NodePool]:
    """VultrCluster ``spec.nodePools``: the plan from the class, sizes from the pool (VKE has
    no zones); AMD when the class's devices are AMD's, for the node taint and labels."""
    out = []
    for pool in pools:
        spec = classes[pool.className].spec
        block = spec.provisioning.vultr if spec.provisioning else None
        assert block is not None  # unavailable_pools holds back pools without one
        amd = has_amd_devices(classes[pool.className])
        gpu = vultr.Gpu(acceleratorType=block.accelerator.type, vendor="AMD" if amd else "NVIDIA")
        out.append(
            vultr.NodePool(name=pool.name, role="GPU", plan=block.plan, **_sizes(pool), gpu=gpu)
        )
    return out


def nebius_pools(
    pools: Sequence[ic.NodePool], classes: Mapping[str, InferenceClass]
) -> list[nebius.NodePool]:
    """NebiusCluster ``spec.nodePools``: platform and preset from the class, sizes from the
    pool, and the pool's one zone (if any) as its InfiniBand fabric."""
    out = []
    for pool in pools:
        provisioning = classes[pool.className].spec.provisioning
        block = provisioning.nebius if provisioning else None
        assert block is not None  # unavailable_pools holds back pools without one
        fields: JSON = {
            "name": pool.name,
            "role": "GPU",
            "platform": block.platform,
            "preset": block.preset,
            "diskSizeGb": block.diskSizeGb if block.diskSizeGb is not None else 256,
            "driversPreset": block.driversPreset or "cuda12",
            **_sizes(pool),
            "gpu": nebius.Gpu(acceleratorType=block.accelerator.type),
        }
        if zones := _zones(pool):
            fields["infinibandFabric"] = zones[0]
        out.append(nebius.NodePool(**fields))
    return out
