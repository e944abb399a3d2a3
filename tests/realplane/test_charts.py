"""The chart host that stands in for the public Helm repositories (no Go, no running plane)."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import shutil
import socket
import ssl
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from modelplane_common import helm
from modelplane_realplane import charts, pki, processes
from modelplane_realplane.charthost import ChartHost
from modelplane_realplane.paths import REPOSITORY

PINNED = charts.pinned_charts()
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
HTTPS = [chart for chart in PINNED if not charts.is_oci(chart)]
OCI = [chart for chart in PINNED if charts.is_oci(chart)]


def _members(chart: helm.Chart) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(charts.build_chart(chart)), mode="r:gz") as tar:
        members = tar.getmembers()
        assert all(member.isfile() for member in members)
        return {m.name: tar.extractfile(m).read() for m in members}  # type: ignore[union-attr]


@functools.cache
def _objects(chart: helm.Chart, folder: str) -> list[dict[str, Any]]:
    """The objects under ``<name>/<folder>/``, templates rendered as Helm would for a release
    named after the chart in its usual namespace."""
    found = []
    for name, data in _members(chart).items():
        if name.startswith(f"{chart.name}/{folder}/"):
            text = data.decode().replace("{{ .Release.Namespace }}", "release-namespace")
            text = text.replace("{{ .Release.Name }}", chart.name)
            found += [doc for doc in yaml.load_all(text, Loader=LOADER) if doc]
    return found


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_the_pins_come_from_the_compositions_and_the_examples() -> None:
    assert len(PINNED) == len(set(PINNED))
    names = {chart.name for chart in PINNED}
    assert {"gateway-helm", "lws", "dra-driver-nvidia-gpu", "metallb", "traefik"} <= names
    assert HTTPS and OCI
    for version in charts.traefik_versions():
        assert any(c.name == "traefik" and c.version == version for c in PINNED)
    for chart in OCI:
        assert charts.hosts([chart])[0] in charts.hosts(PINNED)
    assert set(charts.hosts(HTTPS)) == {urllib.parse.urlsplit(c.repository).hostname for c in HTTPS}


@pytest.mark.parametrize("chart", PINNED, ids=lambda chart: f"{chart.name}-{chart.version}")
def test_every_pinned_chart_is_a_helm_v2_archive_of_its_pin(chart: helm.Chart) -> None:
    members = _members(chart)
    assert all(name.startswith(f"{chart.name}/") for name in members)
    assert all(not name.startswith("/") and ".." not in name for name in members)
    meta = yaml.safe_load(members[f"{chart.name}/Chart.yaml"])
    assert (meta["apiVersion"], meta["name"], meta["version"]) == ("v2", chart.name, chart.version)
    assert "stand-in" in meta["description"]
    for crd in _objects(chart, "crds"):
        assert crd["kind"] == "CustomResourceDefinition"
        assert crd == charts.carried_crds()[(crd["spec"]["group"], crd["spec"]["names"]["kind"])]
    assert all(obj.get("kind") != "Namespace" for obj in _objects(chart, "templates"))
    assert charts.build_chart(chart) == charts.build_chart.__wrapped__(chart)  # reproducible


def _chart(name: str) -> helm.Chart:
    return next(chart for chart in PINNED if chart.name == name)


def test_the_lws_chart_carries_the_leaderworkerset_crd() -> None:
    kinds = {
        (c["spec"]["group"], c["spec"]["names"]["kind"]) for c in _objects(_chart("lws"), "crds")
    }
    assert ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") in kinds


def test_the_envoy_chart_carries_the_gateway_api_crds_the_simulator_expects() -> None:
    kinds = {(c["spec"]["group"], c["spec"]["names"]["kind"])
             for c in _objects(_chart("gateway-helm"), "crds")}  # fmt: skip
    gateway_api = {k for k in charts.CHART_CRDS["gateway-helm"] if k[0].startswith("gateway.net")}
    assert gateway_api and gateway_api <= kinds
    missing = charts.missing_crds()
    for name, expected in charts.CHART_CRDS.items():
        shipped = {
            (c["spec"]["group"], c["spec"]["names"]["kind"]) for c in charts.chart_crds(name)
        }
        assert set(expected) == shipped | set(missing.get(name, []))


def _device_class_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if "deviceClassName" in node and node.get("driver") in (None, "gpu.nvidia.com"):
            yield node["deviceClassName"]
        for value in node.values():
            yield from _device_class_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _device_class_names(value)


def test_the_dra_chart_has_every_gpu_device_class_the_examples_use() -> None:
    used = {name for path in (REPOSITORY / "examples").rglob("*.yaml")
            for doc in yaml.safe_load_all(path.read_text())
            for name in _device_class_names(doc)}  # fmt: skip
    assert used
    classes = {obj["metadata"]["name"]: obj for obj in _objects(_chart("dra-driver-nvidia-gpu"),
                                                                "templates")}  # fmt: skip
    assert used <= set(classes)
    for device_class in classes.values():
        assert device_class["apiVersion"] == "resource.k8s.io/v1"
        expression = device_class["spec"]["selectors"][0]["cel"]["expression"]
        assert expression.startswith("device.driver == 'gpu.nvidia.com'")


def test_the_services_composed_values_point_at_exist() -> None:
    (traefik,) = _objects(_chart("traefik"), "templates")
    assert (traefik["kind"], traefik["metadata"]["name"]) == ("Service", "traefik")
    (controller,) = _objects(_chart("ai-gateway-helm"), "templates")
    assert controller["metadata"]["name"] == "ai-gateway-controller"
    assert controller["spec"]["ports"][0]["port"] == 1063


def test_index_digests_match_the_archives() -> None:
    index = yaml.safe_load(charts.index_yaml(HTTPS, "https://repository.invalid/charts"))
    assert index["apiVersion"] == "v1"
    for chart in HTTPS:
        (entry,) = [e for e in index["entries"][chart.name] if e["version"] == chart.version]
        assert entry["apiVersion"] == "v2"
        assert entry["digest"] == hashlib.sha256(charts.build_chart(chart)).hexdigest()
        assert entry["urls"] == [
            f"https://repository.invalid/charts/{chart.name}-{chart.version}.tgz"
        ]
        assert isinstance(entry["created"], str)


# -------------------------------------------------------------------------------------------
# The host, over TLS


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is missing")
    pki_dir = tmp_path_factory.mktemp("pki")
    pki.make_ca(pki_dir)
    cert, key = charts.issue_chart_host_cert(pki_dir, charts.hosts(PINNED))
    context = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
    with ChartHost(charts.catalog(PINNED), cert, key, port=0) as host:
        yield host.port, context


def _fetch(served: tuple[int, ssl.SSLContext], host: str, path: str,
           method: str = "GET") -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    port, context = served
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}", method=method,
                                     headers={"Host": host})  # fmt: skip
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_the_certificate_names_every_chart_host(served: tuple[int, ssl.SSLContext]) -> None:
    port, context = served
    for host in charts.hosts(PINNED):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:  # fmt: skip
            assert tls.version() is not None


@pytest.mark.parametrize("chart", HTTPS, ids=lambda chart: f"{chart.name}-{chart.version}")
def test_a_helm_repository_serves_its_index_and_archive(served: tuple[int, ssl.SSLContext],
                                                         chart: helm.Chart) -> None:  # fmt: skip
    url = urllib.parse.urlsplit(chart.repository)
    status, _, body = _fetch(served, str(url.hostname), f"{url.path.rstrip('/')}/index.yaml")
    assert status == 200
    (entry,) = [e for e in yaml.safe_load(body)["entries"][chart.name]
                if e["version"] == chart.version]  # fmt: skip
    archive_url = urllib.parse.urlsplit(entry["urls"][0])
    assert archive_url.hostname == url.hostname
    status, _, archive = _fetch(served, str(archive_url.hostname), archive_url.path)
    assert status == 200
    assert hashlib.sha256(archive).hexdigest() == entry["digest"]
    assert _fetch(served, str(url.hostname), f"{url.path}/no-such-chart-0.0.0.tgz")[0] == 404


@pytest.mark.parametrize("chart", OCI, ids=lambda chart: f"{chart.name}-{chart.version}")
def test_an_oci_registry_serves_manifest_config_and_layer(served: tuple[int, ssl.SSLContext],
                                                          chart: helm.Chart) -> None:  # fmt: skip
    url = urllib.parse.urlsplit(chart.repository)
    repository = "/".join(p for p in (url.path.strip("/"), chart.name) if p)
    for host in charts.hosts([chart]):  # the reference's host and the one oras-go dials
        assert _fetch(served, host, "/v2/")[0] == 200
        manifest_path = f"/v2/{repository}/manifests/{charts.oci_tag(chart.version)}"
        status, head, body = _fetch(served, host, manifest_path, "HEAD")
        assert (status, body) == (200, b"")
        digest, size = head["Docker-Content-Digest"], int(head["Content-Length"])
        assert head["Content-Type"] == "application/vnd.oci.image.manifest.v1+json"
        status, got, body = _fetch(served, host, f"/v2/{repository}/manifests/{digest}")
        assert (status, len(body), _sha256(body)) == (200, size, digest)
        assert got["Docker-Content-Digest"] == digest
        manifest = json.loads(body)
        assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
        assert manifest["config"]["mediaType"] == "application/vnd.cncf.helm.config.v1+json"
        (layer,) = manifest["layers"]
        assert layer["mediaType"] == "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
        blobs = {}
        for descriptor in (manifest["config"], layer):
            status, got, blob = _fetch(
                served, host, f"/v2/{repository}/blobs/{descriptor['digest']}"
            )
            assert (status, len(blob), _sha256(blob)) == (200, descriptor["size"],
                                                          descriptor["digest"])  # fmt: skip
            assert int(got["Content-Length"]) == descriptor["size"]
            blobs[descriptor["mediaType"]] = blob
        config = json.loads(blobs[manifest["config"]["mediaType"]])
        assert (config["name"], config["version"]) == (chart.name, chart.version)
        assert blobs[layer["mediaType"]] == charts.build_chart(chart)
        status, _, body = _fetch(served, host, f"/v2/{repository}/tags/list")
        assert status == 200 and charts.oci_tag(chart.version) in json.loads(body)["tags"]


def test_unknown_charts_are_404(served: tuple[int, ssl.SSLContext]) -> None:
    chart = OCI[0]
    host = charts.hosts([chart])[0]
    repository = f"{urllib.parse.urlsplit(chart.repository).path.strip('/')}/no-such-chart"
    for path in (f"/v2/{repository}/manifests/1.0.0", f"/v2/{repository}/tags/list"):
        status, _, body = _fetch(served, host, path)
        assert status == 404 and json.loads(body)["errors"][0]["code"] == "NAME_UNKNOWN"
    known = "/".join(p for p in (urllib.parse.urlsplit(chart.repository).path.strip("/"),
                                 chart.name) if p)  # fmt: skip
    status, _, body = _fetch(served, host, f"/v2/{known}/manifests/0.0.0-missing", "HEAD")
    assert (status, body) == (404, b"")
    status, _, body = _fetch(served, host, f"/v2/{known}/manifests/0.0.0-missing")
    assert json.loads(body)["errors"][0]["code"] == "MANIFEST_UNKNOWN"
    status, _, body = _fetch(served, host, f"/v2/{known}/blobs/{_sha256(b'nothing')}")
    assert status == 404 and json.loads(body)["errors"][0]["code"] == "BLOB_UNKNOWN"
    https = urllib.parse.urlsplit(HTTPS[0].repository)
    assert _fetch(served, str(https.hostname), "/no-such-repository/index.yaml")[0] == 404
    assert _fetch(served, "unknown.invalid", f"{https.path}/index.yaml")[0] == 404


def test_the_command_line_serves_the_pinned_charts(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is missing")
    pki_dir = tmp_path / "pki"
    pki.make_ca(pki_dir)
    charts.issue_chart_host_cert(pki_dir, charts.hosts(PINNED))
    port = processes.free_port()
    logs = tmp_path / "logs"
    pid = processes.start("charthost", [sys.executable, "-m", "modelplane_realplane.charts",
                                        "--run-dir", str(tmp_path), "--port", str(port)],
                          logs)  # fmt: skip
    try:
        log = logs / "charthost.log"
        processes.wait_ready("charthost", pid, log, lambda: "serving" in log.read_text(), 30)
        context = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        status, _, _ = _fetch((port, context), charts.hosts(OCI)[0], "/v2/")
        assert status == 200
    finally:
        processes.stop(pid)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["logs", "pki"]
