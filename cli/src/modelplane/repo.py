"""Where things live in the repository."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path


@cache
def root() -> Path:
    """The repository root: $MODELPLANE_ROOT, else the nearest parent with an apis/ folder."""
    if env := os.environ.get("MODELPLANE_ROOT"):
        return Path(env).resolve()
    for candidate in [Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents]:
        if (candidate / "apis").is_dir() and (candidate / "schemas").is_dir():
            return candidate
    raise FileNotFoundError("cannot find the Modelplane repository (no apis/ and schemas/)")


def shared_crds() -> Path:
    return root().parent / "shared" / "crds"
