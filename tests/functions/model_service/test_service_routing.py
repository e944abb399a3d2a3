"""Endpoint gathering and route status, as pure logic (properties over many inputs)."""

from __future__ import annotations

from compose_model_service import service_routing as routing
from hypothesis import given, settings
from hypothesis import strategies as st

NAMESPACES = st.sampled_from(["team-a", "team-b", "team-c"])
LABELS = st.sampled_from([{"app": "x"}, {"app": "y"}, {"app": "x", "tier": "gold"}])


@st.composite
def endpoint_pool(draw: st.DrawFn) -> list[dict]:
    pool = []
    for i in range(draw(st.integers(0, 8))):
        routable = draw(st.booleans())
        pool.append(
            {
                "metadata": {
                    "name": f"ep-{i}",
                    "namespace": draw(NAMESPACES),
                    "labels": draw(LABELS),
                },
                "spec": {"url": f"http://10.0.0.{i + 1}/v1"},
                "status": {"routing": {"backendName": f"svc-{i}"} if routable else {}},
            }
        )
    return pool


@settings(max_examples=50)
@given(
    pool=endpoint_pool(),
    namespace=NAMESPACES,
    weights=st.lists(st.integers(1, 100), min_size=1, max_size=3),
)
def test_only_same_namespace_routable_endpoints_get_backend_refs(pool, namespace, weights):
    entries = [{"selector": {"matchLabels": {"app": "x"}}, "weight": w} for w in weights]
    # A careless resolver: everything with the labels, from every namespace, for every entry.
    selected = [[e for e in pool if e["metadata"]["labels"]["app"] == "x"] for _ in entries]
    groups = routing.gather(entries, selected, namespace)
    refs = routing.backend_refs(groups)
    allowed = {
        e["status"]["routing"]["backendName"]
        for e in pool
        if e["metadata"]["namespace"] == namespace
        and e["metadata"]["labels"]["app"] == "x"
        and e["status"]["routing"]
    }
    assert {r["name"] for r in refs} == allowed
    assert len(refs) == len(allowed)  # first entry wins: nobody appears twice
    assert all(r["weight"] >= 1 for r in refs)


def test_parent_status_needs_accepted_and_resolved_refs_from_our_gateway():
    ours = {"name": "modelplane", "namespace": "modelplane-system"}

    def route(parent_ref: dict, accepted: str, resolved: str) -> dict:
        return {
            "status": {
                "parents": [
                    {
                        "parentRef": parent_ref,
                        "conditions": [
                            {"type": "Accepted", "status": accepted, "message": "a"},
                            {"type": "ResolvedRefs", "status": resolved, "message": "backend gone"},
                        ],
                    }
                ]
            }
        }

    assert routing.parent_status(route(ours, "True", "True")) == (True, "")
    ok, why = routing.parent_status(route(ours, "True", "False"))
    assert not ok and "backend gone" in why
    ok, why = routing.parent_status(route({"name": "other", "namespace": "x"}, "True", "True"))
    assert not ok and "has not reported" in why
    assert routing.parent_status(None) == (False, "the HTTPRoute is not observed yet")
    assert routing.parent_status({"status": {"parents": "garbage"}})[0] is False


JSONISH = st.recursive(
    st.none() | st.booleans() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["status", "parents", "parentRef", "conditions", "type", "name"]),
            children,
            max_size=3,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=50)
@given(JSONISH)
def test_malformed_route_status_reads_as_not_yet(route):
    ok, why = routing.parent_status(route if isinstance(route, dict) else {"status": route})
    # Garbage never reads as accepted (it cannot name Gateway modelplane with both conditions
    # True), and the user is always told why.
    assert ok is False
    assert isinstance(why, str) and why


def _route(*backends: tuple[str, str]) -> dict:
    refs = [
        {
            "name": name,
            "port": 80,
            "filters": [
                {
                    "type": "URLRewrite",
                    "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": p}},
                }
            ],
        }
        for name, p in backends
    ]
    return {"spec": {"rules": [{"backendRefs": refs}]}}


def _endpoint(name: str, backend: str | None) -> routing.Endpoint:
    return routing.Endpoint(
        name=name,
        backend_name=backend or "",
        url=None,
        rewrite_path="/",
        backend_unknown=backend is None,
    )


def test_an_unknown_endpoint_keeps_its_own_backend_not_a_known_ones_on_a_shared_path():
    # a and b share the rewrite path "/"; b's status was stripped. b keeps svc-b; it must not
    # take svc-a (which would drop svc-b from the route and double a's traffic).
    groups = [routing.Group(weight=100, endpoints=(_endpoint("a", "svc-a"), _endpoint("b", None)))]
    (group,) = routing.with_routed_backends(groups, _route(("svc-a", "/"), ("svc-b", "/")))
    assert [e.backend_name for e in group.endpoints] == ["svc-a", "svc-b"]


def test_unknown_endpoints_keep_every_routed_backend_once():
    # Two unknown endpoints, one unclaimed backend on their path: the backend stays routed, once.
    groups = [routing.Group(weight=100, endpoints=(_endpoint("a", None), _endpoint("b", None)))]
    (group,) = routing.with_routed_backends(groups, _route(("svc-a", "/")))
    assert [e.backend_name for e in group.endpoints] == ["svc-a", ""]
