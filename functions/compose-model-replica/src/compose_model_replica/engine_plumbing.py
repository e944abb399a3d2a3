"""Checks of what the engines' pods would do on the workload cluster, before anything is composed.

Each problem names the field to change. A replica with a problem is refused and keeps what it
runs (fn._invalid): composing it would give pods that never become ready (two containers on one
port, a sidecar that speaks another engine's protocol) or that the API server rejects (an
extended resource requested but not limited, a request above its limit).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from modelplane_common.engines import SGLANG, UNKNOWN, EngineFacts
from modelplane_common.quantity import Quantity, QuantityError
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import (
    Container,
    Engine,
    ModelReplica,
)

from compose_model_replica.backends import serving_member
from compose_model_replica.pods import container_facts


@dataclasses.dataclass(frozen=True)
class PhasePorts:
    """Ports of PrefillDecode serving."""

    pool: int  # the InferencePool's target: where prefill listens and the decode sidecar binds
    decode: int  # where the decode engine itself listens, behind its sidecar


def _container_path(replica: ModelReplica, engine: Engine) -> str:
    engine_index = replica.spec.engines.index(engine)
    member_index = engine.members.index(serving_member(engine))
    return f"spec.engines[{engine_index}].members[{member_index}].template.spec.containers[0]"


def _phase(replica: ModelReplica, phase: str) -> Engine:
    return next(e for e in replica.spec.engines if e.phase == phase)


def _facts(engine: Engine) -> EngineFacts:
    (container,) = serving_member(engine).template.spec.containers
    return container_facts(container)


def phase_ports(replica: ModelReplica) -> PhasePorts:
    return PhasePorts(
        pool=_facts(_phase(replica, "Prefill")).port,
        decode=_facts(_phase(replica, "Decode")).port,
    )


def prefill_decode_problems(replica: ModelReplica) -> tuple[list[str], list[str]]:
    """(problems, warnings) of a PrefillDecode replica whose shape is valid."""
    problems: list[str] = []
    warnings: list[str] = []
    prefill, decode = _phase(replica, "Prefill"), _phase(replica, "Decode")
    for engine in (prefill, decode):
        facts = _facts(engine)
        where = f"{_container_path(replica, engine)} ({engine.phase} engine {engine.name!r})"
        if facts.engine == SGLANG:
            problems.append(
                f"{where} runs SGLang, but PrefillDecode serving composes the llm-d routing "
                "sidecar and NIXL settings, which speak vLLM's KV-transfer protocol only; "
                "serve SGLang with serving.mode Unified, or run vLLM in both phase engines"
            )
        elif facts.engine == UNKNOWN:
            warnings.append(
                f"{where} is not recognised as vLLM (no 'vllm serve' in its command line and no "
                f"vllm in its image name); PrefillDecode assumes vLLM's KV-transfer protocol and "
                f"that it listens on port {facts.port} ({facts.port_source})"
            )
    ports = phase_ports(replica)
    decode_facts = _facts(decode)
    if ports.decode == ports.pool:
        problems.append(
            f"{_container_path(replica, decode)}.args: decode engine {decode.name!r} "
            f"({decode_facts.engine}) listens on port {ports.decode} "
            f"({decode_facts.port_source}), which its routing sidecar must bind: the "
            f"InferencePool sends requests to port {ports.pool}, where prefill engine "
            f"{prefill.name!r} listens, in both engines' pods; move the decode engine with "
            f"--port={ports.pool + 1} in its args"
        )
    return problems, warnings


def _quantity(value: Any) -> Quantity | None:
    try:
        return Quantity.parse(str(value))
    except QuantityError:
        return None


def _resource_problems(container: Container, path: str) -> list[str]:
    if container.resources is None:
        return []
    resources = container.resources.model_dump(mode="json", exclude_none=True)
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    problems: list[str] = []
    for name, value in requests.items():
        wanted, bound = _quantity(value), _quantity(limits[name]) if name in limits else None
        if "/" in name and (bound is None or wanted != bound):
            problems.append(
                f"{path}.resources.limits[{name!r}]: extended resource {name} cannot be "
                f"overcommitted; set it in limits (to {value}, as requested)"
            )
        elif wanted is not None and bound is not None and wanted.compare(bound) > 0:
            problems.append(
                f"{path}.resources.requests[{name!r}]: request {value} is above its limit "
                f"{limits[name]}"
            )
    return problems


def resource_problems(replica: ModelReplica) -> list[str]:
    """Requests and limits the workload cluster's API server would refuse in a pod."""
    problems: list[str] = []
    for engine_index, engine in enumerate(replica.spec.engines):
        for member_index, member in enumerate(engine.members):
            (container,) = member.template.spec.containers
            path = f"spec.engines[{engine_index}].members[{member_index}].template.spec"
            problems.extend(_resource_problems(container, f"{path}.containers[0]"))
    return problems
