"""compose-model-cache: the ModelCache composition function."""
