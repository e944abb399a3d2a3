"""How soon Crossplane calls a function again: the response's TTL (function.SETTLING_TTL)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.function import CompositionFunction, Outcome, Request
from modelplane_common.plain import to_struct
from modelplane_common.serving import run_function

XR = {"apiVersion": "test.modelplane.ai/v1alpha1", "kind": "Thing",
      "metadata": {"name": "t", "namespace": "ns"}}  # fmt: skip
CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}


class OneConfigMap(CompositionFunction):
    """Composes one ConfigMap and reports one condition, as told."""

    name = "ttl-probe"

    def __init__(self, condition: tuple[bool | None, bool], ready: bool | None) -> None:
        super().__init__()
        self.status, self.normal = condition
        self.ready = ready

    def compose(self, request: Request) -> Outcome:
        outcome = Outcome()
        outcome.compose("config", CONFIG_MAP, ready=self.ready)
        outcome.condition("Probe", self.status, "Because", normal=self.normal)
        return outcome


def _ttl(function: CompositionFunction, observed: dict[str, dict]) -> timedelta:
    request = fnv1.RunFunctionRequest(observed=fnv1.State(
        composite=fnv1.Resource(resource=to_struct(XR)),
        resources={k: fnv1.Resource(resource=to_struct(v)) for k, v in observed.items()},
    ))  # fmt: skip
    return run_function(function, request).meta.ttl.ToTimedelta()


OBSERVED = {"config": {**CONFIG_MAP, "status": {"conditions": [{"type": "Ready",
                                                                "status": "True"}]}}}  # fmt: skip


@pytest.mark.parametrize(
    ("condition", "ready", "observed", "ttl"),
    [
        ((True, False), True, OBSERVED, 60),  # everything settled: look again in a minute
        ((False, True), True, OBSERVED, 60),  # False is this condition's normal case
        ((False, False), True, OBSERVED, 5),  # a condition still says not yet
        ((None, False), True, OBSERVED, 5),  # Unknown
        ((True, False), True, {}, 5),  # the ConfigMap is not created yet
        ((True, False), False, OBSERVED, 5),  # composed but not ready
    ],
)  # fmt: skip
def test_a_function_looks_again_soon_while_anything_settles(
    condition: tuple[bool | None, bool], ready: bool | None, observed: dict, ttl: int
) -> None:
    """Crossplane watches composed resources, not required ones: a function waiting on
    anything asks to be called again in 5 s rather than the usual minute."""
    assert _ttl(OneConfigMap(condition, ready), observed) == timedelta(seconds=ttl)
