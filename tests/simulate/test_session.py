"""Scripting the simulator step by step (the API issue-7 scenarios use), over real gRPC."""

from __future__ import annotations

from modelplane.controlplane import session
from modelplane.kube import condition, condition_status
from modelplane.providers import matching
from modelplane_common.function import CompositionFunction, Outcome, Request

API = "test.modelplane.ai/v1alpha1"
COMPLETE = 'object.status.conditions.exists(c, c.type == "Complete" && c.status == "True")'


class HydrateFunction(CompositionFunction):
    """Per spec.items entry, a remote Job wrapped in an Object; ready when the Object is."""

    name = "compose-widget"

    def compose(self, request: Request) -> Outcome:
        outcome = Outcome(composite_status={"count": len(request.spec.get("items") or [])})
        for item in request.spec.get("items") or []:
            key = f"job-{item}"
            observed = request.observed.get(key) or {}
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (observed.get("status") or {}).get("conditions") or []
            )
            outcome.compose(
                key,
                {
                    "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
                    "kind": "Object",
                    "spec": {
                        "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "remote"},
                        "readiness": {"policy": "DeriveFromCelQuery", "celQuery": COMPLETE},
                        "forProvider": {
                            "manifest": {
                                "apiVersion": "batch/v1",
                                "kind": "Job",
                                "metadata": {"name": f"hydrate-{item}", "namespace": "models"},
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "restartPolicy": "Never",
                                            "containers": [{"name": "pull", "image": "busybox"}],
                                        }
                                    }
                                },
                            }
                        },
                    },
                },
                ready=ready,
            )
        return outcome


def widget(items: list[str]) -> dict:
    return {
        "apiVersion": API,
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "team-a"},
        "spec": {"items": items},
    }


def test_scripted_scenario_failure_recovery_scale_and_delete(test_catalog):
    with session(catalog=test_catalog, servicers={"compose-widget": HydrateFunction()}) as plane:
        plane.apply(
            {
                "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
                "kind": "ClusterProviderConfig",
                "metadata": {"name": "remote"},
                "spec": {"credentials": {"source": "InjectedIdentity"}},
            }
        )
        # The Jobs go to this namespace of the (in-cluster) target: it must exist first.
        plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "models"}})
        plane.apply(widget(["a", "b"]))
        assert plane.run(max_rounds=10).converged
        xr = plane.find("Widget", "w", "team-a")
        assert condition_status(xr, "Ready") == "True"
        jobs = plane.list(kind="Object")
        assert len(jobs) == 2
        remote = jobs[0]["status"]["atProvider"]["manifest"]
        assert remote["status"]["succeeded"] == 1

        # A hydration Job fails: its Object turns not Ready, and so does the XR, saying which.
        failure = plane.providers.inject(
            matching(kind="Object", manifest_name="hydrate-b"),
            manifest_status={
                "succeeded": 0,
                "failed": 1,
                "conditions": [
                    {"type": "Complete", "status": "False"},
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"},
                ],
            },
        )
        assert plane.run(max_rounds=10).converged
        ready = condition(plane.find("Widget", "w", "team-a"), "Ready")
        assert (ready["status"], ready["message"]) == ("False", "Unready resources: job-b")

        # ... then succeeds on retry.
        plane.providers.clear(failure)
        assert plane.run(max_rounds=10).converged
        assert condition_status(plane.find("Widget", "w", "team-a"), "Ready") == "True"

        # Scale down: exactly the dropped Object goes.
        names_before = {o["metadata"]["name"] for o in plane.list(kind="Object")}
        plane.patch(plane.key("Widget", "w", "team-a"), {"spec": {"items": ["a"]}})
        assert plane.run(max_rounds=10).converged
        (kept,) = plane.list(kind="Object")
        assert kept["metadata"]["name"] in names_before
        assert kept["spec"]["forProvider"]["manifest"]["metadata"]["name"] == "hydrate-a"

        # Deleting the XR removes everything it composed.
        plane.delete(plane.key("Widget", "w", "team-a"))
        assert plane.run(max_rounds=10).converged
        assert sorted(o["kind"] for o in plane.objects()) == ["ClusterProviderConfig", "Namespace"]
