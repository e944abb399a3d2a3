-- Argo CD health of a VultrCluster (infrastructure.modelplane.ai): the VKE cluster an
-- InferenceCluster composes. Degraded: ClusterReady=False InvalidSpec.
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
    local endpoint = (obj.status or {}).endpoint
    if endpoint ~= nil and endpoint ~= "" then
      return verdict("Healthy", "Cluster and node pools are ready; API server " .. endpoint)
    end
    return verdict("Healthy", "Cluster and node pools are ready")
  end
  return progressing({"ClusterReady"})
end

return health()
