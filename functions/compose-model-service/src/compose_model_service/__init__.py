"""compose-model-service: the ModelService composition function."""
