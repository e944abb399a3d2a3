"""The ModelService and ModelEndpoint XRDs reject malformed routing, naming the field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from modelplane import validation

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "routing"


def _example(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def _messages(obj: dict) -> list[str]:
    return [f"{p.path}: {p.message}" for p in validation.validate_object(obj)]


@pytest.mark.parametrize("plural", ["modelservices", "modelendpoints"])
def test_definitions_pass_api_server_checks(plural):
    definition = yaml.safe_load((ROOT / "apis" / plural / "definition.yaml").read_text())
    assert validation.check_definition(definition) == []


@pytest.mark.parametrize(
    "name",
    [
        "service-canary.yaml",
        "service-hosted.yaml",
        "endpoint-in-fleet.yaml",
        "endpoint-saas.yaml",
        # Schema-valid: the function, not the schema, knows an https IP cannot be verified.
        "endpoint-invalid.yaml",
    ],
)
def test_examples_are_valid(name):
    assert _messages(_example(name)) == []


def test_empty_selector_would_match_everything_and_is_rejected():
    xr = _example("service-canary.yaml")
    xr["spec"]["endpoints"][0]["selector"]["matchLabels"] = {}
    assert any("matchLabels" in m for m in _messages(xr))


@pytest.mark.parametrize("weight", [0, 1_000_001])
def test_weight_out_of_range_is_rejected(weight):
    xr = _example("service-canary.yaml")
    xr["spec"]["endpoints"][1]["weight"] = weight
    assert any("weight" in m for m in _messages(xr))


def test_more_than_sixteen_entries_is_rejected():
    xr = _example("service-canary.yaml")
    xr["spec"]["endpoints"] = [copy.deepcopy(xr["spec"]["endpoints"][0]) for _ in range(17)]
    assert any("endpoints" in m for m in _messages(xr))


def test_no_entries_is_rejected():
    xr = _example("service-canary.yaml")
    xr["spec"]["endpoints"] = []
    assert any("endpoints" in m for m in _messages(xr))


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("url", "ftp://files.example/v1", "spec.url must start with http:// or https://"),
        ("url", "", "url"),
        ("rewritePath", "openai/", "spec.rewritePath must start with /"),
        ("api", "Anthropic", "api"),
    ],
)
def test_endpoint_rules(field, value, expected):
    xr = _example("endpoint-saas.yaml")
    xr["spec"][field] = value
    assert any(expected in m for m in _messages(xr)), _messages(xr)
