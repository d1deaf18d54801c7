"""gpufinops: dashboard."""

# The recommendation kinds' labels are their specs' facts: importing the registry hands them to
# warehouse.labels, which every surface here labels codes through (docs/architecture.md, *Add a model kind*).
from gpufinops.models import registry as _registry  # noqa: F401
