"""Generated models."""
