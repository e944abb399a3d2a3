"""compose-usages: the Usages composition function."""
