"""compose-inference-gateway: the InferenceGateway composition function."""
