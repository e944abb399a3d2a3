-- Argo CD health of an InferenceCluster (modelplane.ai): a workload cluster in the fleet.
-- Degraded: ClusterReady=False InvalidNodePool or InvalidSpec (a pool or class needs fixing).
-- @include _shared.lua

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local cluster = condition("ClusterReady")
  if has(cluster, "False", "InvalidNodePool") or has(cluster, "False", "InvalidSpec") then
    return verdict("Degraded", describe(cluster))
  end
  if has(condition("Ready"), "True") then
    local gateway = (obj.status or {}).gateway or {}
    if gateway.address ~= nil and gateway.address ~= "" then
      return verdict("Healthy", "Serving gateway at " .. gateway.address)
    end
    return verdict("Healthy", "Cluster and serving stack are ready")
  end
  return progressing({"ClusterReady", "BackendReady"})
end

return health()
