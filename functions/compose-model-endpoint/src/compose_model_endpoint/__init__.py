"""compose-model-endpoint: the ModelEndpoint composition function."""
