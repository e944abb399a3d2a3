-- Argo CD health of a ModelReplica (modelplane.ai): one copy of a model on one cluster.
-- Degraded: ModelAccepted=False InvalidSpec. A workload failing on its cluster stays
-- Progressing, its condition message quoted (Argo CD's Lua has no string library to look
-- inside it); the workload's own conditions show there, e.g. ProgressDeadlineExceeded.
-- @include _shared.lua

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local accepted = condition("ModelAccepted")
  if has(accepted, "False", "InvalidSpec") then
    return verdict("Degraded", describe(accepted))
  end
  if has(condition("Ready"), "True") then
    local cluster = (obj.spec or {}).clusterName
    if cluster ~= nil then
      return verdict("Healthy", "Serving on InferenceCluster " .. cluster)
    end
    return verdict("Healthy", "Serving")
  end
  return progressing({"ModelAccepted", "ModelReady"})
end

return health()
