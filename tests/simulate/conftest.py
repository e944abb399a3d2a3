"""Fixtures for the simulator tests: a test-only apis/ catalog and a fake pipeline runner.

The fake runner stands in for ``modelplane.pipeline.run_pipeline`` so the reconciler's own
behaviour (naming, GC, SSA, conditions) is tested fast and in isolation; end-to-end tests run
the real pipeline through real gRPC servers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from modelplane import repo, xrd
from modelplane.controlplane import ControlPlane
from modelplane.pipeline import DesiredResource, PipelineResult

GROUP = "test.modelplane.ai"
API = f"{GROUP}/v1alpha1"


def _xrd(kind: str, plural: str, scope: str, spec_properties: dict) -> str:
    definition = {
        "apiVersion": "apiextensions.crossplane.io/v2",
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {"kind": kind, "plural": plural},
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "referenceable": True,
                    "additionalPrinterColumns": [
                        {"name": "COUNT", "type": "string", "jsonPath": ".status.count"}
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "spec": {"type": "object", "properties": spec_properties},
                                "status": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
    composition = {
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "compositeTypeRef": {"apiVersion": API, "kind": kind},
            "mode": "Pipeline",
            "pipeline": [
                {
                    "step": f"compose-{kind.lower()}",
                    "functionRef": {"name": f"compose-{kind.lower()}"},
                }
            ],
        },
    }
    return yaml.safe_dump_all([definition, composition], sort_keys=False)


WIDGET_SPEC = {
    "items": {"type": "array", "items": {"type": "string"}},
    "replicas": {"type": "integer", "minimum": 1, "maximum": 5, "default": 1},
}


def write_test_apis(root: Path) -> Path:
    """A tmp repository root with test XRDs: Widget (namespaced), Gadget (cluster), Parent."""
    apis = root / "apis"
    for kind, plural, scope in (
        ("Widget", "widgets", "Namespaced"),
        ("Gadget", "gadgets", "Cluster"),
        ("Parent", "parents", "Namespaced"),
    ):
        (apis / plural).mkdir(parents=True)
        (apis / plural / "definition.yaml").write_text(_xrd(kind, plural, scope, WIDGET_SPEC))
    (root / "schemas").mkdir(exist_ok=True)
    return apis


@pytest.fixture
def test_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """MODELPLANE_ROOT pointing at a tmp repository holding only the test XRDs."""
    root = tmp_path / "test-repo"
    write_test_apis(root)
    monkeypatch.setenv("MODELPLANE_ROOT", str(root))
    repo.root.cache_clear()
    xrd.catalog.cache_clear()
    yield root
    monkeypatch.delenv("MODELPLANE_ROOT")
    repo.root.cache_clear()
    xrd.catalog.cache_clear()


@pytest.fixture
def test_catalog(tmp_path: Path) -> xrd.Catalog:
    return xrd.read_catalog(write_test_apis(tmp_path / "repo"))


Compose = Callable[[dict, dict, list], PipelineResult]


class FakeRunner:
    """Runs a composition by calling a Python function registered under its first step's name."""

    def __init__(self) -> None:
        self.functions: dict[str, Compose] = {}
        self.calls: list[tuple[str, dict, dict]] = []

    @staticmethod
    def result(*args, **kwargs) -> PipelineResult:
        return _result(*args, **kwargs)

    def __call__(
        self,
        composition: dict,
        xr: dict,
        observed: dict,
        required: list,
        context: dict | None = None,  # the simulated clock (modelplane.ai/now); unused here
    ) -> PipelineResult:
        step = composition["spec"]["pipeline"][0]["functionRef"]["name"]
        self.calls.append((step, xr, observed))
        return self.functions[step](xr, observed, required)


def _result(
    resources: dict[str, tuple[dict, str]] | None = None,
    status: dict | None = None,
    ready: str = "Unspecified",
    conditions: list[dict] | None = None,
) -> PipelineResult:
    return PipelineResult(
        desired_composite={"status": status or {}},
        composite_ready=ready,
        resources={k: DesiredResource(body, r) for k, (body, r) in (resources or {}).items()},
        conditions=conditions or [],
        results=[],
        context={},
    )


@pytest.fixture
def runner() -> FakeRunner:
    return FakeRunner()


@pytest.fixture
def plane(runner: FakeRunner, test_catalog: xrd.Catalog) -> ControlPlane:
    return ControlPlane(runner, catalog=test_catalog)
