"""``modelplane simulate`` refuses what a real API server refuses (decision D8).

A kind is accepted only when it is built in or its CRD is installed and Established on the
cluster it is applied to: the control plane, or the workload cluster a provider-kubernetes
Object targets.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import compose_inference_gateway.resources as gateway_resources
import pytest
from click.testing import CliRunner
from modelplane import apiserver
from modelplane.main import cli

ROOT = Path(__file__).resolve().parents[2]


def simulate(directory: Path):
    return CliRunner().invoke(cli, ["simulate", str(directory)], catch_exceptions=False)


def test_a_kind_without_its_crd_is_refused_naming_the_kind(tmp_path: Path):
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: demo}\n---\n"
        "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\n"
        "metadata: {name: tls, namespace: demo}\n"
        "spec:\n  targetRefs: [{group: '', kind: Service, name: svc}]\n"
        "  validation: {hostname: api.example.com, wellKnownCACertificates: System}\n"
    )
    result = simulate(tmp_path)
    assert result.exit_code == 1
    assert (
        'BackendTLSPolicy/tls: no matches for kind "BackendTLSPolicy" in version '
        '"gateway.networking.k8s.io/v1"'
    ) in result.stderr


def test_the_old_four_crd_gateway_bundle_no_longer_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The defect this issue is about: GatewayClass, Gateway, HTTPRoute and ReferenceGrant
    only. The hosted https endpoint's BackendTLSPolicy has no CRD on the control plane, and
    Traefik serves nothing without GRPCRoute and BackendTLSPolicy."""
    old = {"gatewayclasses", "gateways", "httproutes", "referencegrants"}
    bundle = gateway_resources.gateway_api_crds()
    assert len(bundle) == 10
    monkeypatch.setattr(
        gateway_resources,
        "gateway_api_crds",
        lambda: tuple(c for c in bundle if c["spec"]["names"]["plural"] in old),
    )
    shutil.copytree(ROOT / "examples" / "canary", tmp_path / "canary")
    result = simulate(tmp_path / "canary")
    assert result.exit_code == 1
    assert "Modelplane resource(s) not Ready and Synced" in result.stderr
    refused = apiserver.no_matches("gateway.networking.k8s.io/v1", "BackendTLSPolicy")
    assert f'cannot apply composed resource "backendtlspolicy": {refused}' in result.stderr
    assert "Traefik's Gateway provider is not running: no CRD for GRPCRoute, BackendTLSPolicy" in (
        result.stderr
    )


def test_a_kind_kubernetes_does_not_have_is_refused_in_a_built_in_group(tmp_path: Path):
    (tmp_path / "widget.yaml").write_text("apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n")
    result = simulate(tmp_path)
    assert result.exit_code == 1
    assert 'Widget/w: no matches for kind "Widget" in version "v1"' in result.stderr
