-- Argo CD health of an AKSCluster (infrastructure.modelplane.ai): the cloud cluster an
-- InferenceCluster composes. Degraded: ClusterReady=False InvalidSpec.
-- @include _shared.lua

return cloudClusterHealth({"ClusterReady"})
