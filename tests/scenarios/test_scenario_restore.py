"""A control plane restored from a backup that strips every status (issue 14).

The multi-cluster example is converged, then every object loses its status at once: XRs,
composed XRs, provider managed resources, remote-object wrappers. Every function then reads
nothing but unknowns on its first reconcile. Nothing may be deleted on the way back (not even
for a round: a deleted PVC, replica or route is real loss), traffic must keep its routes, and
the plane must converge back to exactly what it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelplane.controlplane import ControlPlane
from modelplane.kube import condition_status
from scenario_world import MAX_ROUNDS, diff, fork, label, snapshot

JSON = dict[str, Any]


def _routes(plane: ControlPlane) -> dict[str, list[str]]:
    """HTTPRoute -> the backends it sends traffic to."""
    return {
        label(route): sorted(
            str(ref.get("name"))
            for rule in (route.get("spec") or {}).get("rules") or []
            for ref in rule.get("backendRefs") or []
        )
        for route in plane.list(kind="HTTPRoute")
    }


def _modelplane_status(plane: ControlPlane) -> dict[str, JSON]:
    """Every Modelplane XR's status without conditions (their timestamps move on)."""
    return {
        label(obj): {k: v for k, v in (obj.get("status") or {}).items() if k != "conditions"}
        for obj in plane.objects()
        if obj["apiVersion"].split("/")[0].endswith("modelplane.ai")
    }


def test_restore_without_status_deletes_nothing_and_converges_back(
    converged_example: Callable[[str], Any],
):
    converged = converged_example("multi-cluster")
    assert converged.outcome.converged
    plane = fork(converged.plane)
    before = snapshot(plane)
    routes = _routes(plane)
    statuses = _modelplane_status(plane)
    assert routes and all(routes.values()), "the example routes traffic before the restore"

    deleted: list[str] = []
    delete = plane.delete

    def recording_delete(key: Any) -> list[Any]:
        gone = delete(key)
        deleted.extend(str(k) for k in gone)
        return gone

    plane.delete = recording_delete  # type: ignore[method-assign]

    plane.strip_status()
    assert not any(obj.get("status") for obj in plane.objects())

    for number in range(1, MAX_ROUNDS + 1):
        report = plane.round()
        assert deleted == [], f"round {number} deleted {deleted}"
        assert _routes(plane) == routes, f"round {number} changed where traffic goes"
        if not report.changed:
            break
    else:
        raise AssertionError(f"no fixed point after {MAX_ROUNDS} rounds")

    change = diff(before, snapshot(plane))
    assert not change.touched, change
    assert _modelplane_status(plane) == statuses
    for obj in plane.objects():
        if obj["apiVersion"].split("/")[0].endswith("modelplane.ai"):
            assert condition_status(obj, "Ready") == "True", label(obj)
