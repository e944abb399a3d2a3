-- Argo CD health of a ModelEndpoint (modelplane.ai): one routable backend (a replica or a
-- hosted provider). Degraded: RoutingReady=False InvalidURL (spec.url must be fixed).
-- @include _shared.lua

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local routing = condition("RoutingReady")
  if has(routing, "False", "InvalidURL") then
    return verdict("Degraded", describe(routing))
  end
  if has(condition("Ready"), "True") then
    if routing ~= nil and routing.message ~= nil and routing.message ~= "" then
      return verdict("Healthy", routing.message)
    end
    return verdict("Healthy", "Backend configured")
  end
  return progressing({"RoutingReady"})
end

return health()
