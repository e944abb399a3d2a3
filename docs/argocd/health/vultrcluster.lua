-- Argo CD health of a VultrCluster (infrastructure.modelplane.ai): the VKE cluster an
-- InferenceCluster composes. Degraded: ClusterReady=False InvalidSpec.
-- @include _shared.lua

return cloudClusterHealth({"ClusterReady"})
