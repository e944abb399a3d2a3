"""compose-model-deployment: the ModelDeployment composition function."""
