"""Stand-ins for the public Helm charts Modelplane composes, and the host that serves them.

provider-helm cannot reach the chart repositories, so the real plane runs it where every chart
host resolves to 127.0.0.1 and ``ChartHost`` (charthost.py) answers there as all of them: the
``https://`` repositories (``index.yaml`` and archives) and the ``oci://`` registries. The
charts are pinned where Modelplane pins them (the ServingStack and InferenceGateway defaults,
the examples' Traefik versions) and hold what Modelplane relies on a real chart for: its CRDs
as the simulator's ``CHART_CRDS`` lists them (built from the CRDs the project carries), the
NVIDIA DRA driver's DeviceClasses and the Services composed values point at. Namespaces are
never templated: provider-helm creates a release's namespace before Helm installs into it.

Run as ``python -m modelplane_realplane.charts --run-dir DIR --port P``; it serves with the
certificate ``issue_chart_host_cert`` wrote to ``DIR/pki`` and writes nothing but its log.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import functools
import gzip
import hashlib
import io
import json
import shutil
import tarfile
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from compose_inference_gateway import resources as gateway
from compose_serving_stack import resources as stack
from modelplane.apiserver import CHART_CRDS
from modelplane_common import helm
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import servingstack as ss
from modelplane_schemas.generated.modelplane_ai.v1alpha1.inferencegateway import Traefik

from modelplane_realplane import crds, pki
from modelplane_realplane.charthost import Catalog, ChartHost
from modelplane_realplane.paths import REPOSITORY

CONFIG_MEDIA_TYPE = "application/vnd.cncf.helm.config.v1+json"
CHART_MEDIA_TYPE = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
# Every timestamp in an archive or index, so a chart's digest depends on its content alone.
FIXED_TIME = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
CERT_NAME = "charthost"
# The chart whose Service the Envoy Gateway extension manager dials (its fqdn is in the values).
_AI_GATEWAY_CONTROLLER_CHART = "ai-gateway-helm"
_GPU_DRIVER = "gpu.nvidia.com"


# -------------------------------------------------------------------------------------------
# Which charts, where


@functools.cache
def _stack_releases() -> tuple[tuple[str, helm.Chart, str, Any], ...]:
    """compose-serving-stack's releases for a ServingStack that sets nothing (the pins)."""
    spec = ss.Spec(secrets=[ss.Secret(type="Kubeconfig", name="kubeconfig", key="kubeconfig")])
    return tuple(stack.release_specs(spec))


def traefik_versions() -> list[str]:
    """The XRD's default Traefik chart version and every one an example InferenceGateway sets."""
    versions = {str(Traefik().version)}
    for path in sorted((REPOSITORY / "examples").rglob("*.yaml")):
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue
        for document in documents:
            if isinstance(document, dict) and document.get("kind") == "InferenceGateway":
                version = ((document.get("spec") or {}).get("traefik") or {}).get("version")
                if version:
                    versions.add(str(version))
    return sorted(versions)


@functools.cache
def _gateway_releases() -> tuple[tuple[helm.Chart, str], ...]:
    """(chart, target namespace) of the InferenceGateway's releases, every Traefik version."""
    releases = [gateway.metallb_release()]
    releases += [gateway.traefik_release(version) for version in traefik_versions()]
    found = []
    for release in releases:
        pin = release.spec.forProvider.chart
        chart = helm.Chart(str(pin.name), str(pin.repository), str(pin.version))
        found.append((chart, str(release.spec.forProvider.namespace)))
    return tuple(found)


def pinned_charts() -> list[helm.Chart]:
    """Every chart Modelplane composes a Release of, once each."""
    charts = [chart for _key, chart, _namespace, _values in _stack_releases()]
    charts += [chart for chart, _namespace in _gateway_releases()]
    return list(dict.fromkeys(charts))


def _release_namespaces() -> dict[str, str]:
    """chart name -> the namespace Modelplane installs it into."""
    namespaces = {chart.name: namespace for _key, chart, namespace, _v in _stack_releases()}
    namespaces.update({chart.name: namespace for chart, namespace in _gateway_releases()})
    return namespaces


def is_oci(chart: helm.Chart) -> bool:
    return chart.repository.startswith("oci://")


def _split(chart: helm.Chart) -> tuple[str, str]:
    """(host, path) of the chart's repository: ``oci://h/p`` -> (h, p); https -> (h, /p)."""
    url = urllib.parse.urlsplit(chart.repository)
    path = url.path.rstrip("/")
    return (url.hostname or "").lower(), (path.lstrip("/") if is_oci(chart) else path)


def hosts(charts: Iterable[helm.Chart]) -> list[str]:
    """The repositories' host names. A registry may answer on an API host of its own; the
    chart host answers as any name (wildcarddns.py, and certificates minted on demand)."""
    return sorted({_split(chart)[0] for chart in charts})


def oci_tag(version: str) -> str:
    """The tag Helm pushes a chart version under ("+" is not allowed in a tag)."""
    return version.replace("+", "_")


def archive_name(chart: helm.Chart) -> str:
    """``<name>-<version>.tgz``: provider-helm looks for exactly this file after a pull."""
    return f"{chart.name}-{chart.version}.tgz"


# -------------------------------------------------------------------------------------------
# What a chart holds


@functools.cache
def carried_crds() -> dict[tuple[str, str], dict[str, Any]]:
    """(group, kind) -> CRD: the upstream CRDs the functions carry (Gateway API, Inference
    Extension), else one rebuilt from the shipped schema records."""
    carried: dict[tuple[str, str], dict[str, Any]] = {}
    for crd in crds.shipped_crds():  # fresh objects on every call: safe to amend
        for version in crd["spec"]["versions"]:
            properties = version["schema"]["openAPIV3Schema"].get("properties") or {}
            if "status" in properties:  # as the upstream CRDs have it
                version["subresources"] = {"status": {}}
        carried[(crd["spec"]["group"], crd["spec"]["names"]["kind"])] = crd
    for crd in (*gateway.gateway_api_crds(), *stack.inference_extension_crds()):
        carried[(crd["spec"]["group"], crd["spec"]["names"]["kind"])] = copy.deepcopy(crd)
    return carried


def chart_crds(name: str) -> list[dict[str, Any]]:
    """The CRDs of the chart ``name`` that the project carries, as CHART_CRDS lists them."""
    carried = carried_crds()
    return [carried[kind] for kind in sorted(CHART_CRDS.get(name, ())) if kind in carried]


def missing_crds() -> dict[str, list[tuple[str, str]]]:
    """chart -> (group, kind) CHART_CRDS names that no CRD the project carries provides."""
    carried = carried_crds()
    missing = {name: sorted(k for k in kinds if k not in carried)
               for name, kinds in CHART_CRDS.items()}  # fmt: skip
    return {name: kinds for name, kinds in sorted(missing.items()) if kinds}


def _namespace_field(chart: helm.Chart, namespace: str) -> str:
    """``{{ .Release.Namespace }}`` when ``namespace`` is the release's, else the name."""
    return "{{ .Release.Namespace }}" if _release_namespaces().get(chart.name) == namespace \
        else namespace  # fmt: skip


def _device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses the NVIDIA DRA driver chart installs with GPUs enabled (Modelplane
    disables compute domains, whose classes are not installed then)."""
    classes = []
    for name, device_type in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"),
                              ("vfio.gpu.nvidia.com", "vfio")):  # fmt: skip
        expression = (f"device.driver == '{_GPU_DRIVER}' && "
                      f"device.attributes['{_GPU_DRIVER}'].type == '{device_type}'")  # fmt: skip
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
        if device_type == "gpu":
            spec["extendedResourceName"] = "nvidia.com/gpu"
        classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                        "metadata": {"name": name}, "spec": spec})  # fmt: skip
    return classes


def _service(chart: helm.Chart, name: str, namespace: str, ports: list[dict[str, Any]],
             service_type: str = "ClusterIP") -> dict[str, Any]:  # fmt: skip
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": "{{ .Release.Name }}"}
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": _namespace_field(chart, namespace),
                     "labels": labels},
        "spec": {"type": service_type, "selector": labels, "ports": ports},
    }  # fmt: skip


def _ai_gateway_controller(chart: helm.Chart) -> dict[str, Any]:
    """The controller Service the Envoy Gateway values point the extension manager at."""
    values = next(v for key, _c, _n, v in _stack_releases() if key == stack.KEY_ENVOY_GATEWAY)
    fqdn = values["config"]["envoyGateway"]["extensionManager"]["service"]["fqdn"]
    name, namespace = fqdn["hostname"].split(".")[:2]
    port = {"name": "grpc", "port": fqdn["port"], "targetPort": fqdn["port"], "protocol": "TCP"}
    return _service(chart, name, namespace, [port])


def _traefik_service(chart: helm.Chart) -> dict[str, Any]:
    """The Service Traefik's Gateway provider reports as the Gateway's address."""
    web = {"name": "web", "port": 80, "targetPort": gateway.LISTENER_PORT, "protocol": "TCP"}
    return _service(chart, gateway.TRAEFIK_SERVICE, gateway.TRAEFIK_NAMESPACE, [web],
                    "LoadBalancer")  # fmt: skip


def chart_templates(chart: helm.Chart) -> dict[str, list[dict[str, Any]]]:
    """templates/<file> -> the objects in it."""
    if chart.name == "dra-driver-nvidia-gpu":
        return {"deviceclasses.yaml": _device_classes()}
    if chart.name == "traefik":
        return {"service.yaml": [_traefik_service(chart)]}
    if chart.name == _AI_GATEWAY_CONTROLLER_CHART:
        return {"controller-service.yaml": [_ai_gateway_controller(chart)]}
    return {}


# -------------------------------------------------------------------------------------------
# Archives and repository indexes


_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _QuotingDumper(_BaseDumper):  # type: ignore[valid-type, misc]
    """Every string double-quoted (Go's YAML 1.1 reader takes a bare ``y`` or ``n`` for a
    bool), no anchors, no folded lines."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _quoted(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')


_QuotingDumper.add_representer(str, _quoted)


def to_yaml(documents: Iterable[Any], *, start: bool = True) -> str:
    return yaml.dump_all(list(documents), Dumper=_QuotingDumper, sort_keys=False,
                         explicit_start=start, width=1 << 20)  # fmt: skip


def chart_metadata(chart: helm.Chart) -> dict[str, str]:
    """Chart.yaml (also the OCI config blob, as JSON)."""
    return {
        "apiVersion": "v2",
        "name": chart.name,
        "version": chart.version,
        "appVersion": chart.version,
        "description": f"Modelplane's realplane stand-in for the {chart.name} chart "
                       f"{chart.version}: only what Modelplane relies on it for",
        "type": "application",
    }  # fmt: skip


@functools.cache
def build_chart(chart: helm.Chart) -> bytes:
    """The chart as ``helm package`` makes it: a gzip'd tar of ``<name>/...``, reproducible."""
    files = {"Chart.yaml": to_yaml([chart_metadata(chart)], start=False)}
    for crd in chart_crds(chart.name):
        files[f"crds/{crd['metadata']['name']}.yaml"] = to_yaml([crd])
    for name, objects in chart_templates(chart).items():
        files[f"templates/{name}"] = to_yaml(objects)
    stamp = int(FIXED_TIME.timestamp())
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{chart.name}/{name}")
            info.size, info.mtime, info.mode = len(data), stamp, 0o644
            tar.addfile(info, io.BytesIO(data))
    archive = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=archive, mtime=stamp) as packed:
        packed.write(tar_bytes.getvalue())
    return archive.getvalue()


def index_yaml(charts: Iterable[helm.Chart], base_url: str) -> bytes:
    """A Helm repository index for ``charts``, their archives at ``base_url/<name>-<v>.tgz``."""
    created = FIXED_TIME.strftime("%Y-%m-%dT%H:%M:%SZ")
    entries: dict[str, list[dict[str, Any]]] = {}
    for chart in charts:
        entries.setdefault(chart.name, []).append({
            **chart_metadata(chart),
            "digest": hashlib.sha256(build_chart(chart)).hexdigest(),
            "urls": [f"{base_url.rstrip('/')}/{archive_name(chart)}"],
            "created": created,
        })  # fmt: skip
    index = {"apiVersion": "v1", "entries": entries, "generated": created}
    return to_yaml([index], start=False).encode()


def catalog(charts: Iterable[helm.Chart]) -> Catalog:
    """What the chart host serves for ``charts``."""
    served = Catalog()
    repositories: dict[tuple[str, str], list[helm.Chart]] = {}
    for chart in charts:
        host, path = _split(chart)
        if not is_oci(chart):
            repositories.setdefault((host, path), []).append(chart)
            served.add_file(host, f"{path}/{archive_name(chart)}", build_chart(chart),
                            "application/gzip")  # fmt: skip
            continue
        meta = chart_metadata(chart)
        config = json.dumps(meta, separators=(",", ":")).encode()
        annotations = {"org.opencontainers.image.title": chart.name,
                       "org.opencontainers.image.version": chart.version,
                       "org.opencontainers.image.description": meta["description"]}  # fmt: skip
        repository = "/".join(part for part in (path, chart.name) if part)
        served.add_artifact(host, repository, oci_tag(chart.version),
                            config=(CONFIG_MEDIA_TYPE, config),
                            layers=[(CHART_MEDIA_TYPE, build_chart(chart))],
                            annotations=annotations)  # fmt: skip
    for (host, path), members in repositories.items():
        served.add_file(host, f"{path}/index.yaml", index_yaml(members, f"https://{host}{path}"),
                        "application/x-yaml")  # fmt: skip
    return served


# -------------------------------------------------------------------------------------------
# Certificate and command line


def issue_chart_host_cert(pki_dir: Path, names: Iterable[str],
                          file_name: str = CERT_NAME) -> tuple[Path, Path]:  # fmt: skip
    """``file_name``.crt/.key in ``pki_dir``, signed by its CA, valid for every name given and
    for 127.0.0.1 and localhost."""
    CERT_NAME = file_name  # noqa: N806 (the file names below)
    sans = [f"DNS:{name}" for name in sorted(set(names)) if name != "localhost"]
    sans += ["DNS:localhost", "IP:127.0.0.1"]
    extensions = ["basicConstraints=CA:FALSE", "extendedKeyUsage=serverAuth",
                  "keyUsage=digitalSignature,keyEncipherment",
                  f"subjectAltName={','.join(sans)}"]  # fmt: skip
    (pki_dir / f"{CERT_NAME}.ext").write_text("\n".join(extensions) + "\n")
    pki._openssl(
        pki_dir, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=modelplane-charthost",
        "-keyout", f"{CERT_NAME}.key", "-out", f"{CERT_NAME}.csr",
    )  # fmt: skip
    pki._openssl(
        pki_dir, "x509", "-req", "-in", f"{CERT_NAME}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "30", "-out", f"{CERT_NAME}.crt",
        "-extfile", f"{CERT_NAME}.ext",
    )  # fmt: skip
    return pki_dir / f"{CERT_NAME}.crt", pki_dir / f"{CERT_NAME}.key"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run-dir",
        type=Path,
        required=True,
        help="the plane's run folder (the certificate is in its pki/)",
    )
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=443)
    args = parser.parse_args(argv)
    charts = pinned_charts()
    pki_dir = args.run_dir / "pki"
    minted = pki_dir / "charthost-minted"
    minted.mkdir(exist_ok=True)
    shutil.copy(pki_dir / "ca.crt", minted / "ca.crt")
    shutil.copy(pki_dir / "ca.key", minted / "ca.key")

    def mint(name: str) -> tuple[Path, Path]:
        print(f"minting a certificate for {name}", flush=True)
        return issue_chart_host_cert(minted, [name], f"host-{name}")

    host = ChartHost(catalog(charts), pki_dir / f"{CERT_NAME}.crt", pki_dir / f"{CERT_NAME}.key",
                     args.address, args.port, mint=mint)  # fmt: skip
    for chart in charts:
        print(f"chart {chart.name} {chart.version} from {chart.repository}", flush=True)
    print(f"serving {len(charts)} charts as {', '.join(hosts(charts))} on "
          f"{args.address}:{host.port}", flush=True)  # fmt: skip
    host.serve_forever()


if __name__ == "__main__":
    main()
