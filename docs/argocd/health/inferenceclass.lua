-- Argo CD health of an InferenceClass (modelplane.ai): a device shape clusters offer.
-- Degraded: Accepted=False (the class is invalid and no cluster can use it).
-- @include _shared.lua

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local accepted = condition("Accepted")
  if has(accepted, "False") then
    return verdict("Degraded", describe(accepted))
  end
  if has(condition("Ready"), "True") then
    return verdict("Healthy", "Accepted")
  end
  return progressing({"Accepted"})
end

return health()
