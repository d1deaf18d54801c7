"""gpufinops: the built-in recommendation kinds' spec modules, one per kind (docs/architecture.md,
*Add a model kind*)."""
