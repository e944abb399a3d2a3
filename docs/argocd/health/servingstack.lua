-- Argo CD health of a ServingStack (infrastructure.modelplane.ai): what an InferenceCluster
-- installs on its workload cluster. Degraded: StackReady=False InvalidSpec.
-- @include _shared.lua

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local stack = condition("StackReady")
  if has(stack, "False", "InvalidSpec") then
    return verdict("Degraded", describe(stack))
  end
  if has(condition("Ready"), "True") then
    local gateway = (obj.status or {}).gateway or {}
    if gateway.address ~= nil and gateway.address ~= "" then
      return verdict("Healthy", "Serving gateway at " .. gateway.address)
    end
    return verdict("Healthy", "Serving stack installed")
  end
  return progressing({"StackReady"})
end

return health()
