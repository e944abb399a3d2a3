-- Argo CD health of an InferenceGateway (modelplane.ai): the control-plane gateway controller.
-- Degraded: ControllerReady=False InvalidName or InvalidSpec (nothing is installed until fixed).
-- @include _shared.lua

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local controller = condition("ControllerReady")
  if has(controller, "False", "InvalidName") or has(controller, "False", "InvalidSpec") then
    return verdict("Degraded", describe(controller))
  end
  if has(condition("Ready"), "True") then
    local address = (obj.status or {}).address
    if address ~= nil and address ~= "" then
      return verdict("Healthy", "Gateway address " .. address)
    end
    return verdict("Healthy", "Gateway accepted; no address assigned yet")
  end
  return progressing({"ControllerReady"})
end

return health()
