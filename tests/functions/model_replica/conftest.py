"""Make replica_support importable here (pytest runs with --import-mode=importlib)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="module")
def stub():
    """A RunFunction stub connected to compose-model-replica served over real gRPC."""
    from compose_model_replica.fn import ModelReplicaFunction  # noqa: PLC0415
    from modelplane_common.serving import serve_in_background  # noqa: PLC0415

    with serve_in_background(ModelReplicaFunction()) as connected:
        yield connected
