"""The control-plane objects that make one ModelEndpoint routable (decisions.md D1).

A selectorless Service gives the endpoint a name Traefik's Gateway API provider can route to;
an EndpointSlice labelled with that Service's name tells Traefik where the endpoint really is;
for https a BackendTLSPolicy makes Traefik speak TLS to it and verify the URL host.
"""

from __future__ import annotations

import ipaddress

from modelplane_common.endpoint_url import EndpointURL
from modelplane_common.plain import JSON

SERVICE_KEY = "service"
BACKEND_TLS_POLICY_KEY = "backendtlspolicy"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
# Anything but the Kubernetes EndpointSlice controller's own value, so it leaves the slice alone.
MANAGED_BY = "modelplane.ai"
ENDPOINT_LABEL = "modelplane.ai/model-endpoint"


def endpoint_slice_key(url: EndpointURL) -> str:
    """One key per address type: addressType is immutable, so a change needs a new slice."""
    return f"endpointslice-{url.address_type.lower()}"


def port_name(url: EndpointURL) -> str:
    # The EndpointSlice port is matched to the Service port by this name.
    return url.scheme


def service(namespace: str, endpoint_name: str, url: EndpointURL) -> JSON:
    """The selectorless Service; Crossplane names it."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": namespace, "labels": {ENDPOINT_LABEL: endpoint_name}},
        "spec": {
            "type": "ClusterIP",
            "ports": [
                {
                    "name": port_name(url),
                    "protocol": "TCP",
                    "port": url.port,
                    "targetPort": url.port,
                }
            ],
        },
    }


def endpoint_slice(namespace: str, endpoint_name: str, service_name: str, url: EndpointURL) -> JSON:
    """The EndpointSlice backing ``service_name`` with the URL's single address."""
    address = url.host
    if url.address_type != "FQDN":
        address = ipaddress.ip_address(url.host).compressed
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "namespace": namespace,
            "labels": {
                SERVICE_NAME_LABEL: service_name,
                MANAGED_BY_LABEL: MANAGED_BY,
                ENDPOINT_LABEL: endpoint_name,
            },
        },
        "addressType": url.address_type,
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": port_name(url), "protocol": "TCP", "port": url.port}],
    }


def backend_tls_policy(
    namespace: str, endpoint_name: str, service_name: str, url: EndpointURL
) -> JSON:
    """TLS to the endpoint, verified against the system CAs for the URL's host."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "BackendTLSPolicy",
        "metadata": {"namespace": namespace, "labels": {ENDPOINT_LABEL: endpoint_name}},
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": service_name}],
            "validation": {"hostname": url.host, "wellKnownCACertificates": "System"},
        },
    }
