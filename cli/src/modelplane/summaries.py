"""``modelplane summarize``: the capacity and cache summaries a control plane would publish
for the InferenceClusters (and the ModelReplicas pinned to them) in some files.

A ModelDeployment reads ConfigMaps ``modelplane-system/capacity-<cluster>``, and a ModelCache
``modelplane-system/caches-<cluster>``, instead of every InferenceCluster and ModelReplica
(design/capacity.md). On a control plane compose-inference-cluster composes them; to render a
ModelDeployment or ModelCache without one, pass them with the clusters (``kubectl get
configmaps -n modelplane-system -l modelplane.ai/capacity-summary=true -o yaml``, and
``modelplane.ai/cache-summary=true``, on a real one, or this command's output for clusters
written by hand). It builds them with compose-inference-cluster's own code, from the status
the files give each cluster.
"""

from __future__ import annotations

import click
import yaml
from modelplane_common.capacity_summary import summaries

from modelplane.render import load_objects

__all__ = ["command", "summaries"]


@click.command("summarize")
@click.argument("location")
def command(location: str) -> None:
    """Print the capacity and cache summary ConfigMaps for the InferenceClusters in LOCATION
    (a file or folder), as compose-inference-cluster would compose them from their status."""
    click.echo(yaml.safe_dump_all(summaries(load_objects(location)), sort_keys=False), nl=False)
