"""compose-inference-cluster: the InferenceCluster composition function."""
