-- Argo CD health of a ModelService (modelplane.ai): one address routing over ModelEndpoints.
-- Degraded: RoutingReady=False InvalidSpec. No matching endpoint yet is Progressing: endpoints
-- of a ModelDeployment appear only once its replicas are ready.
-- @include _shared.lua

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local routing = condition("RoutingReady")
  if has(routing, "False", "InvalidSpec") then
    return verdict("Degraded", describe(routing))
  end
  if has(condition("Ready"), "True") then
    local address = (obj.status or {}).address
    local endpoints = condition("EndpointsResolved")
    local message = "Routing"
    if address ~= nil and address ~= "" then
      message = "Serving at " .. address
    end
    if endpoints ~= nil and endpoints.message ~= nil and endpoints.message ~= "" then
      message = message .. " (" .. endpoints.message .. ")"
    end
    return verdict("Healthy", message)
  end
  return progressing({"EndpointsResolved", "RoutingReady"})
end

return health()
