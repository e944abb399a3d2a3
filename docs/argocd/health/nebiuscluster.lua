-- Argo CD health of a NebiusCluster (infrastructure.modelplane.ai): the mk8s cluster an
-- InferenceCluster composes. Degraded: ClusterReady=False InvalidSpec. While the platform
-- team's kubeconfig Secret is missing (KubeconfigReady=False KubeconfigIncomplete) it is
-- Progressing, showing the step that message names.
-- @include _shared.lua

return cloudClusterHealth({"KubeconfigReady", "ClusterReady"})
