-- Argo CD health of a ModelCache (modelplane.ai): model weights staged on matching clusters.
-- Degraded: ArtifactReady=False Failed or InvalidSpec, or a cluster in phase Failed (its
-- hydration Job gave up; it retries by itself, but usually needs a fix such as a token Secret).
-- @include _shared.lua

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
