"""Checks of what the engines' pods would do on the workload cluster, before anything is composed.

A replica with a problem is refused and keeps what it runs (fn._invalid): composing it would
give pods that never become ready (two containers on one port, a sidecar that speaks another
engine's protocol) or that the API server rejects (an extended resource requested but not
limited, a request above its limit). The checks are shared (modelplane_common.engines) with the
ModelDeployment function and `modelplane validate`, which report the same words earlier.
"""

from __future__ import annotations

from typing import Any

from modelplane_common import engines
from modelplane_schemas.generated.modelplane_ai.v1alpha1.modelreplica import ModelReplica


def _spec(replica: ModelReplica) -> dict[str, Any]:
    return replica.spec.model_dump(mode="json", exclude_none=True)


def problems(replica: ModelReplica) -> list[str]:
    return engines.engine_problems(_spec(replica))[0]


def warnings(replica: ModelReplica) -> list[str]:
    return engines.engine_problems(_spec(replica))[1]


def phase_ports(replica: ModelReplica) -> engines.PhasePorts:
    return engines.phase_ports(_spec(replica)["engines"])
