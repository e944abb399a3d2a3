"""compose-inference-class: the InferenceClass composition function."""
