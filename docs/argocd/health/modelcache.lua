-- Argo CD health of a ModelCache (modelplane.ai): model weights staged on matching clusters.
-- Degraded: ArtifactReady=False Failed or InvalidSpec, or a cluster in phase Failed (its
-- hydration Job gave up; it retries by itself, but usually needs a fix such as a token Secret).
-- BEGIN shared (identical in every file under docs/argocd/health; a test keeps it so)
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
-- END shared

local function firstFailedCluster()
  for _, cluster in ipairs((obj.status or {}).clusters or {}) do
    if cluster.phase == "Failed" then
      return cluster
    end
  end
  return nil
end

local function staged()
  local summary = (obj.status or {}).summary or {}
  if summary.ready ~= nil then
    return " (" .. summary.ready .. " clusters staged)"
  end
  return ""
end

local function health()
  local crossplane = crossplaneHealth()
  if crossplane ~= nil then
    return crossplane
  end
  local artifact = condition("ArtifactReady")
  local failedCluster = firstFailedCluster()
  if has(artifact, "False", "InvalidSpec") then
    return verdict("Degraded", describe(artifact))
  end
  if has(artifact, "False", "Failed") or failedCluster ~= nil then
    local message = "Failed: hydration failed"
    if artifact ~= nil and artifact.reason == "Failed" then
      message = describe(artifact)
    end
    if failedCluster ~= nil then
      message = message .. "; " .. (failedCluster.name or "a cluster")
      if failedCluster.message ~= nil and failedCluster.message ~= "" then
        message = message .. ": " .. failedCluster.message
      end
    end
    return verdict("Degraded", message)
  end
  if has(condition("Ready"), "True") then
    if artifact ~= nil and artifact.message ~= nil and artifact.message ~= "" then
      return verdict("Healthy", "Artifact " .. artifact.message)
    end
    return verdict("Healthy", "Artifact staged")
  end
  local waiting = progressing({"ClustersMatched", "ArtifactReady"})
  waiting.message = waiting.message .. staged()
  return waiting
end

return health()
