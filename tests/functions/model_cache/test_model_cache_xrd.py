"""The ModelCache XRD rejects what the function must never see, with messages naming fields."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from modelplane import validation

ROOT = Path(__file__).resolve().parents[3]


def _example(name: str = "cache.yaml") -> dict:
    return yaml.safe_load((ROOT / "examples" / "cache" / name).read_text())


def _messages(obj: dict) -> list[str]:
    return [f"{p.path}: {p.message}" for p in validation.validate_object(obj)]


def test_definition_passes_api_server_checks():
    definition = yaml.safe_load((ROOT / "apis" / "modelcaches" / "definition.yaml").read_text())
    assert validation.check_definition(definition) == []


@pytest.mark.parametrize("name", ["cache.yaml", "cache-public.yaml"])
def test_examples_are_valid(name):
    assert _messages(_example(name)) == []


def test_hugging_face_block_is_required_for_that_source():
    xr = _example()
    del xr["spec"]["huggingFace"]
    assert any(
        "spec.huggingFace is required when spec.source is HuggingFace" in m for m in _messages(xr)
    )


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("huggingFace", "sizeGiB"), 0, "sizeGiB"),
        (("huggingFace", "sizeGiB"), 100001, "sizeGiB"),
        (("huggingFace", "repo"), "", "repo"),
        (("huggingFace", "repo"), "evil/x; rm -rf /", "repo"),
        (("huggingFace", "revision"), "main && curl x", "revision"),
        (("huggingFace", "authSecret"), {"key": "token"}, "name"),
        (("source",), "S3", "source"),
    ],
)
def test_bad_fields_are_rejected_naming_the_field(path, value, field):
    xr = copy.deepcopy(_example())
    target = xr["spec"]
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    messages = _messages(xr)
    assert messages, f"{path}={value!r} was accepted"
    assert any(field in m for m in messages), messages


def _hugging_face_rules() -> list[dict]:
    definition = yaml.safe_load((ROOT / "apis" / "modelcaches" / "definition.yaml").read_text())
    schema = definition["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]["properties"]["huggingFace"]["x-kubernetes-validations"]


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        ({"repo": "a/b", "revision": "main"}, {"repo": "a/b", "revision": "main"}, True),
        (
            {"repo": "a/b", "revision": "main"},
            {"repo": "a/b", "revision": "main", "sizeGiB": 9},
            True,
        ),
        ({"repo": "a/b"}, {"repo": "a/c"}, False),
        ({"repo": "a/b", "revision": "main"}, {"repo": "a/b", "revision": "v2"}, False),
        ({"repo": "a/b"}, {"repo": "a/b", "revision": "main"}, False),
        ({"repo": "a/b", "revision": "main"}, {"repo": "a/b"}, False),
    ],
)
def test_repo_and_revision_are_immutable_ic1(old, new, allowed):
    from modelplane import celrules  # noqa: PLC0415

    outcomes = [
        celrules.compile_rule(rule["rule"]).evaluate({"self": new, "oldSelf": old}) is True
        for rule in _hugging_face_rules()
    ]
    assert all(outcomes) == allowed
