"""Real Kubernetes and Crossplane, built from their Go modules and run as local processes."""
