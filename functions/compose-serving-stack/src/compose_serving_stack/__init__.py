"""compose-serving-stack: the ServingStack composition function."""
