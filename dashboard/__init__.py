"""gpufinops: dashboard."""

# The recommendation kinds' labels are their specs' facts: importing the registry hands them to
# kernel.labels, which every surface here labels codes through (docs/architecture.md, *Add a model kind*).
from gpufinops.models import registry as _registry  # noqa: F401
