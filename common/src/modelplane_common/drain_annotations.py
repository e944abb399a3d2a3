"""Annotations the ModelDeployment function stamps on ModelReplicas during a drain (a NoExecute
taint or a failover) and the InferenceCluster function reports from (issue 15)."""

# Why the replica must leave its cluster, e.g. ``taint modelplane.ai/maintenance:NoExecute``.
DRAINING = "modelplane.ai/draining"
# Why no other cluster can take its replacement (the drain waits for capacity).
BLOCKED = "modelplane.ai/drain-blocked"
# On a replacement: the name of the draining replica it takes over from.
REPLACES = "modelplane.ai/replaces"
# A label on a ModelEndpoint whose replica is going (a scale-down, or a drain whose successor
# serves): ModelServices take it out of their routes, and the replica and endpoint are deleted
# only once no route sends them traffic (make-before-break, docs/model-deployment.md).
RETIRING = "modelplane.ai/retiring"
