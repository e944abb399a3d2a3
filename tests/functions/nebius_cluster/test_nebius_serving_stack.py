"""The ServingStack of a Nebius cluster: its ProviderConfigs read the published kubeconfig with
the platform team's Nebius service-account credentials as identity, and the XRD refuses two
identities at once."""

from __future__ import annotations

from compose_serving_stack.fn import ServingStackFunction
from modelplane.validation import defaulted, validate_object
from modelplane_common.naming import child_name
from modelplane_common.serving import run_function
from modelplane_common.testing import desired_resources, make_request

NS = "modelplane-system"
NAME = child_name("nebius-eu-north", "serving-stack")
KUBECONFIG = {"type": "Kubeconfig", "name": "nebius-eu-north-kubeconfig", "key": "kubeconfig"}
CREDENTIALS = {
    "type": "NebiusServiceAccountCredentials",
    "name": "nebius-credentials",
    "key": "credentials.json",
}


def stack(secrets: list[dict]) -> dict:
    return defaulted(
        {
            "apiVersion": "infrastructure.modelplane.ai/v1alpha1",
            "kind": "ServingStack",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"secrets": secrets},
        }
    )


def test_provider_configs_carry_the_nebius_identity():
    xr = stack([KUBECONFIG, CREDENTIALS])
    assert validate_object(xr) == []
    desired = desired_resources(run_function(ServingStackFunction(), make_request(xr)))
    for key in ("provider-config-kubernetes", "provider-config-helm"):
        spec = desired[key]["spec"]
        assert validate_object(desired[key], source=key) == []
        assert spec["credentials"]["secretRef"]["name"] == "nebius-eu-north-kubeconfig"
        assert spec["identity"] == {
            "type": "NebiusServiceAccountCredentials",
            "source": "Secret",
            "secretRef": {"name": "nebius-credentials", "namespace": NS, "key": "credentials.json"},
        }


def test_the_xrd_refuses_two_identities():
    gcp = {"type": "GCPServiceAccountKey", "name": "gke-sa-key", "key": "private_key"}
    problems = " | ".join(str(p) for p in validate_object(stack([KUBECONFIG, CREDENTIALS, gcp])))
    assert "spec.secrets may hold one identity" in problems
