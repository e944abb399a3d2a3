"""Generated models. Do not edit."""
