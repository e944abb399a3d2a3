"""Issue 22 through gRPC: engines listen where they really listen, a pod whose containers would
share a port (or whose sidecar cannot speak its engine's protocol) is refused naming the engine,
and pods get the settings production engines need, with defaults that never override the user.
"""

from __future__ import annotations

import copy

import pytest
from modelplane import validation
from replica_support import (
    cluster,
    example,
    manifest_of,
    manifest_problems,
    observed_object,
    request,
    summarize,
)

CLUSTER = "gke-us-central"
SGLANG_COMMAND = ["python3", "-m", "sglang.launch_server"]


def _run(stub, xr, observed=None):
    return summarize(stub.RunFunction(request(xr, [cluster(CLUSTER)], observed), timeout=30))


def _container(xr, engine=0, member=0):
    return xr["spec"]["engines"][engine]["members"][member]["template"]["spec"]["containers"][0]


def _pod_spec(xr, engine=0, member=0):
    return xr["spec"]["engines"][engine]["members"][member]["template"]["spec"]


def _manifest(summary, key):
    return manifest_of(summary["resources"][key]["object"])


def _serving_pod(workload):
    if workload["kind"] == "LeaderWorkerSet":
        return workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    return workload["spec"]["template"]["spec"]


def _engine(pod):
    return next(c for c in pod["containers"] if c["name"] == "engine")


def _conditions(summary):
    return {
        c["type"]: (c["status"], c["reason"], c.get("message", "")) for c in summary["conditions"]
    }


# --------------------------------------------------------------------------------------------
# Ports come from the engine's command line, with each engine's real default


@pytest.mark.parametrize(
    ("image", "command", "args", "port"),
    [
        # The vLLM image's entrypoint is `vllm serve`: args alone, vLLM's default port.
        ("vllm/vllm-openai:v0.11.0", None, ["--model=Qwen/Qwen3-8B"], 8000),
        ("vllm/vllm-openai:v0.11.0", None, ["--model=Qwen/Qwen3-8B", "--port", "9000"], 9000),
        # SGLang listens on 30000 unless told otherwise.
        ("lmsysorg/sglang:v0.5.2", SGLANG_COMMAND, ["--model-path", "/models/q"], 30000),
        ("lmsysorg/sglang:v0.5.2", SGLANG_COMMAND, ["--model-path=/m", "--port=31000"], 31000),
        # A shell script: only the engine's own flags count, not Ray's --port.
        (
            "vllm/vllm-openai:v0.11.0",
            ["sh", "-c"],
            ["ray start --head --port=6379 && exec vllm serve /models/q --port=8100"],
            8100,
        ),
        (
            "vllm/vllm-openai:v0.11.0",
            ["sh", "-c"],
            ["ray start --head --port=6379 && vllm serve m"],
            8000,
        ),
        # An engine Modelplane does not recognise keeps the serving contract's port.
        ("example.com/my-engine:1", ["/serve"], [], 8000),
    ],
)
def test_the_serving_port_probes_and_service_follow_the_engine(stub, image, command, args, port):
    xr = example("standalone")
    container = _container(xr)
    container.update(image=image, args=args)
    container.pop("command", None)
    if command is not None:
        container["command"] = command
    summary = _run(stub, xr)
    workload = _manifest(summary, "model-serving-main")
    engine = _engine(_serving_pod(workload))
    assert engine["ports"] == [{"name": "http", "containerPort": port}]
    assert engine["readinessProbe"]["httpGet"] == {"path": "/health", "port": port}
    assert engine["startupProbe"]["httpGet"] == {"path": "/health", "port": port}
    service = _manifest(summary, "model-service")
    assert service["spec"]["ports"] == [{"port": 80, "targetPort": "http"}]
    assert engine.get("args", []) == args  # read, never rewritten (D2)


def test_two_engines_on_different_ports_share_one_service_by_port_name(stub):
    xr = example("two-engines")
    _container(xr, engine=1).update(
        image="lmsysorg/sglang:v0.5.2", command=SGLANG_COMMAND, args=["--model-path=/m"]
    )
    summary = _run(stub, xr)
    names = [k for k in summary["resources"] if k.startswith("model-serving-")]
    ports = sorted(
        _engine(_serving_pod(_manifest(summary, k)))["ports"][0]["containerPort"] for k in names
    )
    assert ports == [8000, 30000]
    assert _manifest(summary, "model-service")["spec"]["ports"][0]["targetPort"] == "http"


# --------------------------------------------------------------------------------------------
# Prefill/decode: one port per container, and only engines the sidecar speaks


def _pd(decode_args=None, prefill_args=None):
    xr = example("prefill-decode")
    if prefill_args is not None:
        _container(xr, engine=0)["args"] = prefill_args
    if decode_args is not None:
        _container(xr, engine=1)["args"] = decode_args
    return xr


def test_a_decode_engine_left_on_vllms_default_port_is_refused_naming_engine_and_port(stub):
    summary = _run(stub, _pd(decode_args=["--model=meta-llama/Llama-3.1-8B-Instruct"]))
    status, reason, message = _conditions(summary)["ModelAccepted"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert "spec.engines[1].members[0].template.spec.containers[0].args" in message
    assert "decode engine 'decode' (vLLM) listens on port 8000 (vLLM's default)" in message
    assert "--port=8001" in message
    assert summary["resources"] == {}


def test_an_explicit_decode_port_8000_is_refused_too(stub):
    summary = _run(stub, _pd(decode_args=["--port=8000"]))
    assert _conditions(summary)["ModelAccepted"][:2] == ("False", "InvalidSpec")


def test_a_refused_decode_port_keeps_the_running_replica(stub):
    xr = _pd()
    running = _run(stub, xr)
    observed = {
        key: observed_object(r["object"], name=f"obj-{key}", ready=True)
        for key, r in running["resources"].items()
    }
    broken = copy.deepcopy(xr)
    _container(broken, engine=1)["args"] = ["--model=m"]
    held = _run(stub, broken, observed)
    assert set(held["resources"]) == set(running["resources"])
    for key, resource in held["resources"].items():
        assert manifest_of(resource["object"]) == manifest_of(running["resources"][key]["object"])


def test_prefill_on_another_port_moves_the_pool_and_the_sidecar_with_it(stub):
    summary = _run(
        stub, _pd(prefill_args=["--model=m", "--port=9000"], decode_args=["--port=9001"])
    )
    pool = _manifest(summary, "inference-pool")
    assert pool["spec"]["targetPorts"] == [{"number": 9000}]
    decode = _serving_pod(_manifest(summary, "model-serving-decode"))
    engine, sidecar = decode["containers"]
    assert engine["ports"] == [{"name": "engine", "containerPort": 9001}]
    assert sidecar["ports"] == [{"name": "http", "containerPort": 9000}]
    assert sidecar["args"][0] == "--port=9000" and sidecar["args"][-1] == "--vllm-port=9001"
    prefill = _engine(_serving_pod(_manifest(summary, "model-serving-prefill")))
    assert prefill["ports"] == [{"name": "http", "containerPort": 9000}]
    for key in ("model-serving-prefill", "model-serving-decode", "inference-pool"):
        assert manifest_problems(_manifest(summary, key)) == []


def test_prefill_decode_with_sglang_is_refused_naming_the_engine(stub):
    xr = _pd()
    _container(xr, engine=0).update(
        image="lmsysorg/sglang:v0.5.2", command=SGLANG_COMMAND, args=["--model-path=/m"]
    )
    summary = _run(stub, xr)
    status, reason, message = _conditions(summary)["ModelAccepted"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert "Prefill engine 'prefill'" in message and "runs SGLang" in message
    assert not any("VLLM_" in str(r) for r in summary["resources"].values())


def test_an_unrecognised_prefill_decode_engine_is_composed_with_a_warning(stub):
    xr = _pd(decode_args=["--port=8001"])
    _container(xr, engine=0).update(image="example.com/engine:1", command=["/serve"], args=[])
    summary = _run(stub, xr)
    assert "inference-pool" in summary["resources"]
    assert any(r.get("reason") == "UnrecognisedEngine" for r in summary["results"])


# --------------------------------------------------------------------------------------------
# Pod settings: defaults where the user says nothing


def test_engine_pods_get_requests_bounded_shm_a_long_startup_probe_and_no_surge(stub):
    summary = _run(stub, example("standalone"))
    workload = _manifest(summary, "model-serving-main")
    pod = _serving_pod(workload)
    engine = _engine(pod)
    assert engine["resources"]["requests"] == {"cpu": "2", "memory": "8Gi"}
    assert "limits" not in engine["resources"]
    assert engine["resources"]["claims"] == [{"name": "devices"}]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
    startup = engine["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 3600
    assert "livenessProbe" not in engine
    # Never a surge pod (pools are full); and Available keeps meaning every copy is up.
    assert workload["spec"]["strategy"] == {"type": "Recreate"}
    assert manifest_problems(workload) == []


def test_gangs_roll_without_surge_and_followers_get_no_serving_probes(stub):
    summary = _run(stub, example("gang-with-cache"))
    lws = _manifest(summary, "model-serving-llama")
    assert lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == {
        "maxSurge": 0,
        "maxUnavailable": 1,
    }
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    engine = _engine(worker)
    assert "startupProbe" not in engine and "readinessProbe" not in engine
    assert engine["resources"]["requests"] == {"cpu": "2", "memory": "8Gi"}
    assert manifest_problems(lws) == []


# --------------------------------------------------------------------------------------------
# Pod settings: what the user sets wins, and reaches the pod


def _tuned() -> dict:
    xr = example("gang-with-cache")
    for member in (0, 1):
        pod = _pod_spec(xr, member=member)
        pod["shmSize"] = "32Gi"
        pod["securityContext"] = {"runAsUser": 1000, "fsGroup": 1000}
        pod["volumes"] = [
            {"name": "rdma", "hostPath": {"path": "/dev/infiniband", "type": "Directory"}},
            {"name": "hf-token", "secret": {"secretName": "hf-token"}},
        ]
        container = _container(xr, member=member)
        container["resources"] = {
            "limits": {"memory": "200Gi", "rdma/ib": 1},
            "requests": {"cpu": "16", "rdma/ib": 1},
        }
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        container["volumeMounts"] = [
            {"name": "rdma", "mountPath": "/dev/infiniband"},
            {"name": "hf-token", "mountPath": "/etc/hf", "readOnly": True},
        ]
    leader = _container(xr, member=0)
    leader["startupProbe"] = {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": 30,
        "failureThreshold": 120,
    }
    leader["livenessProbe"] = {"tcpSocket": {"port": 8000}, "periodSeconds": 20}
    return xr


def test_user_pod_settings_pass_through_and_defaults_never_override_them(stub):
    xr = _tuned()
    assert [p.message for p in validation.validate_object(xr)] == []
    summary = _run(stub, xr)
    lws = _manifest(summary, "model-serving-llama")
    templates = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = templates[role]["spec"]
        engine = _engine(pod)
        # A memory limit alone: no default memory request may exceed or replace it.
        assert engine["resources"]["requests"] == {"cpu": "16", "rdma/ib": 1}
        assert engine["resources"]["limits"] == {"memory": "200Gi", "rdma/ib": 1}
        assert engine["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert pod["securityContext"] == {"runAsUser": 1000, "fsGroup": 1000}
        assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in pod[
            "volumes"
        ]
        assert [v["name"] for v in pod["volumes"]] == ["dshm", "model-cache", "rdma", "hf-token"]
        assert [m["mountPath"] for m in engine["volumeMounts"]] == [
            "/dev/shm",
            "/mnt/models",
            "/dev/infiniband",
            "/etc/hf",
        ]
    leader = _engine(templates["leaderTemplate"]["spec"])
    assert leader["startupProbe"]["failureThreshold"] == 120  # the user's, not the default
    assert leader["livenessProbe"] == {"tcpSocket": {"port": 8000}, "periodSeconds": 20}
    assert leader["readinessProbe"]["httpGet"]["port"] == 8000  # default kept where unset
    assert manifest_problems(lws) == []


@pytest.mark.parametrize(
    ("resources", "words"),
    [
        ({"requests": {"rdma/ib": 1}}, "extended resource rdma/ib cannot be overcommitted"),
        (
            {"requests": {"rdma/ib": 2}, "limits": {"rdma/ib": 1}},
            "extended resource rdma/ib cannot be overcommitted",
        ),
        ({"requests": {"memory": "64Gi"}, "limits": {"memory": "32Gi"}}, "above its limit 32Gi"),
    ],
)
def test_resources_the_api_server_would_refuse_are_refused_naming_the_field(stub, resources, words):
    xr = example("standalone")
    _container(xr)["resources"] = resources
    status, reason, message = _conditions(_run(stub, xr))["ModelAccepted"]
    assert (status, reason) == ("False", "InvalidSpec")
    assert "spec.engines[0].members[0].template.spec.containers[0].resources" in message
    assert words in message


# --------------------------------------------------------------------------------------------
# The XRD refuses pod settings that could never work


def _xrd_messages(mutate) -> list[str]:
    xr = example("standalone")
    mutate(xr)
    return [p.message for p in validation.validate_object(xr)]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda xr: _container(xr).update(volumeMounts=[{"name": "nope", "mountPath": "/x"}]),
            "every volumeMounts[].name must name a volume in template.spec.volumes",
        ),
        (
            lambda xr: _container(xr).update(resources={"limits": {"nvidia.com/gpu": 1}}),
            "GPUs are claimed through nodeSelector.devices (DRA)",
        ),
        (
            lambda xr: (
                _pod_spec(xr).update(
                    volumes=[{"name": "s", "emptyDir": {}}],
                )
                or _container(xr).update(volumeMounts=[{"name": "s", "mountPath": "/dev/shm"}])
            ),
            "/dev/shm and /mnt/models are mounted by Modelplane",
        ),
        (
            lambda xr: _pod_spec(xr).update(
                volumes=[{"name": "two", "emptyDir": {}, "secret": {"secretName": "x"}}]
            ),
            "a volume needs exactly one of",
        ),
        (
            lambda xr: _pod_spec(xr).update(volumes=[{"name": "dshm", "emptyDir": {}}]),
            "names of Modelplane's own volumes",
        ),
        (
            lambda xr: _container(xr).update(
                startupProbe={"httpGet": {"port": 8000}, "tcpSocket": {"port": 8000}}
            ),
            "startupProbe needs exactly one of httpGet, tcpSocket, exec or grpc",
        ),
        (
            lambda xr: _container(xr).update(
                livenessProbe={"tcpSocket": {"port": 8000}, "successThreshold": 2}
            ),
            "livenessProbe.successThreshold must be 1",
        ),
        (lambda xr: _pod_spec(xr).update(shmSize="lots"), 'Invalid value: "lots"'),
    ],
)
def test_the_xrd_refuses_pod_settings_that_cannot_work(mutate, expected):
    messages = _xrd_messages(mutate)
    assert [m for m in messages if expected in m], messages
