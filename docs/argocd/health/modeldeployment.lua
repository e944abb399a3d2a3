-- Argo CD health of a ModelDeployment (modelplane.ai): a model served by N replicas in the fleet.
-- Degraded: the scheduler cannot run (InvalidNodeSelector, InvalidSpec), there is no cluster at
-- all (NoClusters), or it is short of capacity (InsufficientCapacity) while not every replica
-- asked for is ready: more capacity or fewer replicas is needed.
-- @include _shared.lua

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local scheduled = condition("ReplicasScheduled")
  local replicas = condition("ReplicasReady")
  if has(scheduled, "False", "InvalidNodeSelector") or has(scheduled, "False", "InvalidSpec") then
    return verdict("Degraded", describe(scheduled))
  end
  if has(scheduled, "False", "NoClusters") then
    return verdict("Degraded", "NoClusters: no InferenceCluster to schedule replicas on")
  end
  if has(scheduled, "False", "InsufficientCapacity") and not has(replicas, "True") then
    return verdict("Degraded", describe(scheduled))
  end
  if has(condition("Ready"), "True") then
    if replicas ~= nil and replicas.message ~= nil then
      return verdict("Healthy", "Serving: " .. replicas.message)
    end
    return verdict("Healthy", "Serving")
  end
  return progressing({"ReplicasScheduled", "ReplicasReady"})
end

return health()
