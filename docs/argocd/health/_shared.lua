-- BEGIN shared (docs/argocd/health/_shared.lua, inserted by generate_configmap.py)
local function condition(conditionType)
  local status = obj.status or {}
  for _, c in ipairs(status.conditions or {}) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

local function has(c, status, reason)
  return c ~= nil and c.status == status and (reason == nil or c.reason == reason)
end

-- "Reason: message", or the reason alone when there is no message.
local function describe(c)
  local reason = c.reason or c.type
  if c.message ~= nil and c.message ~= "" then
    return reason .. ": " .. c.message
  end
  return reason
end

local function verdict(status, message)
  return {status = status, message = message}
end

-- What Crossplane itself says, the same for every kind; nil leaves it to the kind's conditions.
local function crossplaneHealth()
  local annotations = obj.metadata.annotations or {}
  if annotations["crossplane.io/paused"] == "true" then
    return verdict("Suspended", "Reconciliation is paused (annotation crossplane.io/paused)")
  end
  local synced = condition("Synced")
  if synced == nil then
    return verdict("Progressing", "Waiting for Crossplane to reconcile")
  end
  -- Conditions written for an older spec say nothing about the one just synced.
  local generation = obj.metadata.generation
  if generation ~= nil and synced.observedGeneration ~= nil
      and synced.observedGeneration < generation then
    return verdict("Progressing", "Waiting for Crossplane to reconcile generation " .. generation)
  end
  if has(synced, "False", "ReconcileError") then
    return verdict("Degraded", describe(synced))
  end
  if has(synced, "False") then
    return verdict("Progressing", describe(synced))
  end
  return nil
end

-- Progressing, explained by the first of these conditions that is not True, else by Ready.
local function progressing(types)
  for _, conditionType in ipairs(types) do
    local c = condition(conditionType)
    if c ~= nil and c.status ~= "True" then
      return verdict("Progressing", describe(c))
    end
  end
  local ready = condition("Ready")
  if ready == nil then
    return verdict("Progressing", "Waiting for the Ready condition")
  end
  return verdict("Progressing", describe(ready))
end

-- A cloud cluster an InferenceCluster composes (GKECluster, EKSCluster, AKSCluster,
-- NebiusCluster, VultrCluster): Degraded on ClusterReady=False InvalidSpec, Healthy once
-- Ready (with the API server when published), else Progressing explained by ``waits``.
local function cloudClusterHealth(waits)
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
  return progressing(waits)
end
-- END shared
