"""Property-based: for random valid replicas, the composed output is always applicable.

Every generated replica is first checked against the real XRD (schema + CEL), so the properties
hold for exactly the replicas the API server admits.
"""

from __future__ import annotations

import re

from compose_model_replica.fn import ModelReplicaFunction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelplane import validation
from modelplane_common.engines import engine_facts
from replica_support import manifest_of, object_problems, ready_cluster, request, summarize

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SERVING_LABELS = ("modelplane.ai/serving", "llm-d.ai/inference-serving", "llm-d.ai/role")

label = st.from_regex(r"[a-z]([-a-z0-9]{0,14}[a-z0-9])?", fullmatch=True)
long_label = st.from_regex(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)
selectors = st.lists(
    st.sampled_from(
        [
            'device.attributes["gpu.nvidia.com"].architecture == "Hopper"',
            'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
            'device.attributes["modelplane.ai"].gpusPerNode >= 8',
            "device.attributes['modelplane.ai'].fabric == 'infiniband'",
        ]
    ).map(lambda cel: {"cel": cel}),
    max_size=3,
)
device_requests = st.lists(
    st.builds(
        lambda name, cls, count, sel: {
            "name": name,
            "deviceClassName": cls,
            "count": count,
            **({"selectors": sel} if sel else {}),
        },
        label,
        st.sampled_from(["gpu.nvidia.com", "mig.nvidia.com", "neuron.amazonaws.com"]),
        st.integers(1, 8),
        selectors,
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda r: r["name"],
)
args = st.lists(
    st.sampled_from(
        [
            "--model=/mnt/models",
            "--model=Qwen/Qwen3-8B",
            "--port=8001",
            "--port",
            "8002",
            "--block-size=32",
            "--page-size=auto",
            "--tensor-parallel-size=8",
        ]
    ),
    max_size=5,
)
env = st.lists(
    st.one_of(
        st.builds(
            lambda n, v: {"name": n, "value": v}, st.sampled_from(["A", "B", "HF_HOME"]), label
        ),
        st.builds(
            lambda n, s: {"name": n, "valueFrom": {"secretKeyRef": {"name": s, "key": "token"}}},
            st.sampled_from(["HF_TOKEN", "API_KEY"]),
            label,
        ),
    ),
    max_size=3,
    # env is a list map keyed by name: the workload API server rejects a repeated name.
    unique_by=lambda item: item["name"],
)
user_labels = st.dictionaries(
    st.sampled_from(["team", "app", "modelplane.ai/serving", "llm-d.ai/role", "tier"]),
    label,
    max_size=3,
)


@st.composite
def templates(draw):
    container = {
        "name": "engine",
        "image": draw(st.sampled_from(["vllm/vllm-openai:v0.11.0", "r/sglang:1"])),
    }
    if draw(st.booleans()):
        container["args"] = draw(args)
    if draw(st.booleans()):
        container["command"] = ["/bin/sh", "-c", "exec serve /mnt/models"]
    if draw(st.booleans()):
        container["env"] = draw(env)
    template = {"spec": {"containers": [container]}}
    if draw(st.booleans()):
        template["spec"]["imagePullSecrets"] = [{"name": draw(label)}]
    labels = draw(user_labels)
    if labels:
        template["metadata"] = {"labels": labels}
    return template


@st.composite
def engines(draw, name):
    pool = draw(st.sampled_from(["l4", "h100", "a100-80gb"]))
    engine = {"name": name, "copies": draw(st.integers(1, 4))}
    if draw(st.booleans()):
        engine["members"] = [
            {
                "role": "Standalone",
                "nodePoolName": pool,
                "deviceRequests": draw(device_requests),
                "template": draw(templates()),
            }
        ]
        return engine
    leader_claims = draw(st.booleans())
    leader = {"role": "Leader", "nodePoolName": pool, "template": draw(templates())}
    worker = {"role": "Worker", "nodePoolName": pool, "template": draw(templates())}
    if leader_claims:
        leader["deviceRequests"] = draw(device_requests)
    if not leader_claims or draw(st.booleans()):
        worker["deviceRequests"] = draw(device_requests)
    if draw(st.booleans()):
        worker["worker"] = {"nodes": draw(st.integers(1, 4))}
    members = [leader, worker]
    engine["members"] = draw(st.permutations(members))
    return engine


@st.composite
def replicas(draw):
    prefill_decode = draw(st.booleans())
    if prefill_decode:
        names = draw(st.lists(label, min_size=2, max_size=2, unique=True))
    else:
        names = draw(st.lists(label, min_size=1, max_size=3, unique=True))
    spec = {"clusterName": "gke-us-central", "engines": [draw(engines(n)) for n in names]}
    if prefill_decode:
        spec["serving"] = {"mode": "PrefillDecode"}
        spec["engines"][0]["phase"] = "Prefill"
        spec["engines"][1]["phase"] = "Decode"
    gang = any(len(e["members"]) == 2 for e in spec["engines"])
    if gang or draw(st.booleans()):
        spec["modelCacheRef"] = {"name": draw(label)}
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {"name": draw(long_label), "namespace": draw(label)},
        "spec": spec,
    }


def _pod_templates(manifest):
    """(template, serves) for every pod template of an engine workload."""
    if manifest["kind"] == "LeaderWorkerSet":
        lwt = manifest["spec"]["leaderWorkerTemplate"]
        return [(lwt["leaderTemplate"], True), (lwt["workerTemplate"], False)]
    return [(manifest["spec"]["template"], True)]


def _prefill_decode_refusal(xr) -> str:
    """The words a PrefillDecode replica the sidecar cannot serve is refused with, or ""."""
    if (xr["spec"].get("serving") or {}).get("mode") != "PrefillDecode":
        return ""
    facts = {}
    for engine in xr["spec"]["engines"]:
        member = next(m for m in engine["members"] if m.get("role", "Standalone") != "Worker")
        (container,) = member["template"]["spec"]["containers"]
        image, command, args = container["image"], container.get("command"), container.get("args")
        facts[engine["phase"]] = engine_facts(image, command, args)
    if any(f.engine == "SGLang" for f in facts.values()):
        return "runs SGLang"
    return "listens on port" if facts["Prefill"].port == facts["Decode"].port else ""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replicas())
def test_random_valid_replicas_compose_applicable_uniquely_named_objects(xr):
    assert [str(p) for p in validation.validate_object(xr)] == []
    stored = validation.defaulted(xr)
    summary = summarize(ModelReplicaFunction().run(request(stored, [ready_cluster()])))
    assert [r for r in summary["results"] if r["severity"] == "FATAL"] == []
    resources = summary["resources"]
    refusal = _prefill_decode_refusal(stored)
    if refusal:
        # A sidecar and engine on one port, or a sidecar that cannot speak SGLang: refused.
        accepted = next(c for c in summary["conditions"] if c["type"] == "ModelAccepted")
        assert (accepted["status"], accepted["reason"]) == ("False", "InvalidSpec")
        assert refusal in accepted["message"]
        assert resources == {}
        return
    assert resources, "a ready cluster always gets objects"

    identities = set()
    for key, resource in resources.items():
        assert object_problems(resource["object"]) == [], key
        manifest = manifest_of(resource["object"])
        name = manifest["metadata"]["name"]
        assert len(name) <= 63 and DNS_LABEL.match(name), (key, name)
        identity = (manifest["apiVersion"], manifest["kind"], name)
        assert identity not in identities, identity
        identities.add(identity)

    workloads = [
        manifest_of(resources[f"model-serving-{e['name']}"]["object"])
        for e in xr["spec"]["engines"]
    ]
    front_selectors = [
        manifest_of(resources[key]["object"])["spec"]["selector"]
        for key in ("model-service", "inference-pool")
        if key in resources
    ]
    front_selectors = [s.get("matchLabels", s) for s in front_selectors]
    deployment_selectors = []
    for workload in workloads:
        for template, serves in _pod_templates(workload):
            labels = (template.get("metadata") or {}).get("labels") or {}
            if not serves:
                # Followers never serve: no serving label, and neither the Service nor the
                # InferencePool selects them.
                assert not set(SERVING_LABELS) & set(labels), labels
                assert not [s for s in front_selectors if s.items() <= labels.items()]
        if workload["kind"] == "Deployment":
            deployment_selectors.append(workload["spec"]["selector"]["matchLabels"])
    # No Deployment's selector matches another Deployment's pods.
    for workload in workloads:
        if workload["kind"] != "Deployment":
            continue
        labels = workload["spec"]["template"]["metadata"]["labels"]
        matching = [s for s in deployment_selectors if s.items() <= labels.items()]
        assert len(matching) == 1
