-- Argo CD health of a NebiusCluster (infrastructure.modelplane.ai): the mk8s cluster an
-- InferenceCluster composes. Degraded: ClusterReady=False InvalidSpec. While the platform
-- team's kubeconfig Secret is missing (KubeconfigReady=False KubeconfigIncomplete) it is
-- Progressing, showing the step that message names.
-- @include _shared.lua

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local cluster = condition("ClusterReady")
  if has(cluster, "False", "InvalidSpec") then
    return verdict("Degraded", describe(cluster))
  end
  if has(condition("Ready"), "True") then
    return verdict("Healthy", "Cluster and node pools are ready")
  end
  return progressing({"KubeconfigReady", "ClusterReady"})
end

return health()
