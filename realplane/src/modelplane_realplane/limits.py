"""A function's request near and past gRPC's 4 MiB, on the real plane and in ``simulate``.

A ModelCache without a ``clusterSelector`` reads the cache summary of every cluster where it
is wanted (design/cache-staging.md), so its request grows with them. Here a few large summaries
stand for many ordinary ones (the limit is on bytes): past 3 MiB real Crossplane must emit
the function's ``RequestNearLimit`` warning as an event on the ModelCache; past 4 MiB the
function, run from its image with default flags, refuses the request and Crossplane marks the
ModelCache ``Synced=False``, in the words ``modelplane simulate`` must use too. The summaries
name no provider config (clusters still being provisioned), so nothing is composed on them.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from modelplane_common import capacity_summary as cs

from modelplane_realplane import kubeapi
from modelplane_realplane.kubeapi import Client

JSON = dict[str, Any]
NAMESPACE = "limits"
CACHE = "oversized"
PADDING_KEY = "padding"  # a data key compose-model-cache does not read (it reads DATA_KEY)
SUMMARY_BYTES = 100_000
NEAR = 34  # 3.4 MB of summaries: past 3 MiB, under 4 MiB
PAST = 45  # 4.5 MB: past 4 MiB
SIZES = re.compile(r"\d+(\.\d+)? ?(MiB|vs\. \d+|\))")


def cache() -> JSON:
    return {
        "apiVersion": "modelplane.ai/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": CACHE, "namespace": NAMESPACE},
        "spec": {
            "source": "HuggingFace",
            "huggingFace": {"repo": "Qwen/Qwen3-8B", "sizeGiB": 20},
        },
    }


def namespace() -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def _cluster(index: int) -> str:
    return f"limit-{index:03d}"


def summary(index: int) -> JSON:
    """The cache summary of cluster ``limit-<index>``, where replicas mounting the cache are
    placed and which has no provider config yet, padded to about ``SUMMARY_BYTES``."""
    cluster = _cluster(index)
    replica = {"name": f"{CACHE}-{index:03d}", "remoteNamespace": NAMESPACE}
    content = {
        "version": cs.VERSION,
        "cluster": cluster,
        "labels": {},
        "spec": {"cluster": {"source": "Existing"}},
        "status": {},
        "caches": {f"{NAMESPACE}/{CACHE}": [replica]},
    }
    configmap = cs.cache_configmap(cluster, {}, content)
    configmap["data"][PADDING_KEY] = "x" * (SUMMARY_BYTES - len(configmap["data"][cs.DATA_KEY]))
    return configmap


@dataclasses.dataclass
class Outcome:
    near_event: str  # the RequestNearLimit event's message
    refused: str  # the Synced=False message past the limit
    recovered: bool  # Synced=True again once the summaries shrink back
    seconds: float


def _touch(client: Client, step: str) -> None:
    """Have Crossplane reconcile the cache now: a new summary does not wake it (it is a
    required resource, not a composed one), a change to the ModelCache does."""
    obj = cache()
    obj["metadata"]["annotations"] = {"realplane.modelplane.ai/step": step}
    client.apply(obj)


def _synced(client: Client) -> JSON | None:
    xr = client.get("modelplane.ai/v1alpha1", "ModelCache", CACHE, NAMESPACE)
    return kubeapi.condition(xr, "Synced")


def _near_event(client: Client) -> str | None:
    for event in client.list("v1", "Event", NAMESPACE):
        involved = event.get("involvedObject") or {}
        if involved.get("name") == CACHE and event.get("reason") == "RequestNearLimit":
            return str(event.get("message", ""))
    return None


def run(client: Client, timeout: float = 300) -> Outcome:
    """Grow the cache's request past 3 MiB, then past 4 MiB, then back; what Crossplane said."""
    started = time.monotonic()
    client.apply(namespace())
    client.apply(cache())
    kubeapi.wait("the ModelCache synced", lambda: (_synced(client) or {}).get("status") == "True",
                 timeout)  # fmt: skip
    try:
        for index in range(NEAR):
            client.apply(summary(index))
        _touch(client, "near")
        near = kubeapi.wait("a RequestNearLimit event", lambda: _near_event(client), timeout)
        for index in range(NEAR, PAST):
            client.apply(summary(index))
        _touch(client, "past")

        def refused() -> str | None:
            synced = _synced(client) or {}
            return synced.get("message") if synced.get("status") == "False" else None

        message = kubeapi.wait("the ModelCache refused past 4 MiB", refused, timeout)
        _drop_summaries(client, range(NEAR, PAST))
        _touch(client, "back")
        recovered = kubeapi.wait(
            "the ModelCache synced again",
            lambda: (_synced(client) or {}).get("status") == "True",
            timeout,
        )
    finally:
        _drop_summaries(client, range(PAST))
        client.delete("modelplane.ai/v1alpha1", "ModelCache", CACHE, NAMESPACE)
        # Gone before the examples reconcile: their judges read every XR on the plane.
        kubeapi.wait("the ModelCache deleted", lambda: _gone(client), timeout)
        client.delete("v1", "Namespace", NAMESPACE)
    return Outcome(near, str(message), bool(recovered), time.monotonic() - started)


def _drop_summaries(client: Client, indices: range) -> None:
    for index in indices:
        client.delete("v1", "ConfigMap", cs.cache_configmap_name(_cluster(index)), cs.NAMESPACE)


def _gone(client: Client) -> bool:
    try:
        client.get("modelplane.ai/v1alpha1", "ModelCache", CACHE, NAMESPACE)
    except kubeapi.ApiError as error:
        return error.code == 404
    return False


def simulated_refusal(work: Path) -> tuple[int, str]:
    """``modelplane simulate`` of the same objects past 4 MiB: its exit code and the
    ModelCache's Synced message."""
    work.mkdir(parents=True, exist_ok=True)
    documents = [namespace(), cache(), *(summary(i) for i in range(PAST))]
    (work / "limits.yaml").write_text(yaml.safe_dump_all(documents))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "modelplane"), "simulate", "-o", "yaml", str(work)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    for obj in yaml.safe_load_all(done.stdout):
        if isinstance(obj, dict) and obj.get("kind") == "ModelCache":
            synced = kubeapi.condition(obj, "Synced") or {}
            return done.returncode, str(synced.get("message", ""))
    raise RuntimeError(f"simulate printed no ModelCache:\n{done.stderr[-2000:]}")


def without_sizes(message: str) -> str:
    """``message`` with its byte counts masked: Crossplane's copy of the ModelCache carries
    fields (uid, managedFields) that simulate's does not, so the sizes differ by a little."""
    return SIZES.sub("<size>", message)
