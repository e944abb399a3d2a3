"""Deterministic names for composed objects (platform spec C1)."""

from __future__ import annotations

import hashlib

MAX_NAME_LENGTH = 63
_HASH_LENGTH = 5

# The InferenceCluster a replica (and each Object it composes there) is pinned to.
CLUSTER_LABEL = "modelplane.ai/cluster"
# On a ModelCache's Objects: the cluster they stage to. Not CLUSTER_LABEL, which guards a
# cluster against deletion while replicas' Objects remain: a cache follows its selector, and
# a cluster being deleted must not wait for weights nobody runs. The InferenceCluster reads it
# to compose the cache tenant's namespace there (D10).
CACHE_CLUSTER_LABEL = "modelplane.ai/cache-cluster"


def child_name(*parts: str) -> str:
    """Join parts with '-', cut to 57 characters and always append a 5-hex hash of the whole.

    The result is at most 63 characters, so it is a valid DNS label whenever the parts are, and
    a valid DNS subdomain whenever they are subdomains: the cut may land just after a '.', which
    is stripped like a '-' (a '.-' pair is never valid).
    """
    full = "-".join(parts)
    digest = hashlib.sha256(full.encode()).hexdigest()[:_HASH_LENGTH]
    prefix = full[: MAX_NAME_LENGTH - _HASH_LENGTH - 1].rstrip("-.")
    return f"{prefix}-{digest}"
