"""Modelplane generated models."""
