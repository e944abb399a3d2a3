"""Names a real control plane gives Modelplane's functions (spec packaging.md §3).

``crossplane project build`` pushes each embedded function as ``<repository>_<function>`` and the
Configuration's dependency manager installs it as a ``Function`` named after that package path
(registry dropped, made a DNS label), so Compositions reference e.g.
``modelplane-modelplanecompose-model-deployment``. render, simulate and validate map such a name
back to the function directory it was built from.
"""

from __future__ import annotations

import re

# The OCI repository of the Configuration (crossplane-project.yaml spec.repository).
REPOSITORY = "xpkg.example.io/modelplane/modelplane"
_DNS_LABEL_MAX = 63


def function_package(function: str, repository: str = REPOSITORY) -> str:
    """The OCI repository ``crossplane project push`` pushes ``function`` to."""
    return f"{repository}_{function}"


def installed_name(function: str, repository: str = REPOSITORY) -> str:
    """The ``Function`` name Crossplane installs for ``function`` of this project."""
    path = function_package(function, repository).partition("/")[2]
    label = re.sub(r"[^a-z0-9-]", "", path.lower().replace("/", "-").replace(".", "-"))
    return label[:_DNS_LABEL_MAX].strip("-")


_PREFIX = installed_name("")


def function_directory(name: str) -> str:
    """The function directory a ``functionRef.name`` runs: the installed name's suffix, or the
    name itself (a bare directory name, as tests and hand-started functions use)."""
    if name.startswith(_PREFIX) and len(name) > len(_PREFIX):
        return name[len(_PREFIX) :]
    return name
