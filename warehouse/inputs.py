"""The inputs derived figures need, and the derived figures: declared once, read by ``warehouse/coverage.py``,
by each model kind's ``needs`` (``models/kind_spec.py``) and by ``gpufinops doctor``'s feature matrix.

Nothing is imported here, so a model kind's spec module can check its ``needs`` without loading a library.
An input's source types are the ingest registry's types that load its table (the warehouse does not import
ingest: ``tests/test_coverage.py`` holds the two lists equal).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Input:
    """One kind of input data: the warehouse table it lands in and the source types that load it."""

    name: str
    label: str  # what it is, in a sentence ("GPU utilisation metrics")
    tables: tuple[str, ...]  # the warehouse tables its sources load
    source_types: tuple[str, ...]

    def hint(self, them: str = "them") -> str:
        """Which sources would provide it, as a sentence fragment ("… source provides them", or ``them``)."""
        *head, last = self.source_types
        names = f"{', '.join(head)} or {last}" if head else last
        return f"{'an' if names[0] in 'aeiou' else 'a'} {names} source provides {them}"


_GPU_METRICS = ("cloudwatch_gpu", "dcgm_exporter", "nvidia_smi_csv", "prometheus")
INPUTS: dict[str, Input] = {
    i.name: i
    for i in (
        Input(
            "bill",
            "billed GPU usage",
            ("cost_line_items",),
            ("aws_cur", "azure_cost_export", "focus_files", "gcp_billing_export", "onprem"),
        ),
        Input("utilisation", "GPU utilisation metrics", ("gpu_metrics_hourly",), _GPU_METRICS),
        Input("power", "GPU power measurements", ("gpu_metrics_hourly",), _GPU_METRICS),
        Input(
            "serving",
            "token and request counters",
            ("serving_metrics_hourly",),
            ("prometheus_serving", "serving_exporter"),
        ),
        Input(
            "prices",
            "instance and spot prices",
            ("instance_types", "price_catalog", "price_history", "spot_interruption_bands", "spot_prices"),
            ("aws_pricing", "aws_spot_advisor", "aws_spot_prices", "azure_prices", "gcp_catalog", "gcp_price_history"),
        ),
        Input("storage", "storage inventory", ("storage_volumes",), ("aws_storage", "azure_storage", "gcp_storage")),
    )
}
# The inputs measured per billed (or measured) GPU-hour; the others are present or absent as a whole.
HOURLY_INPUTS = ("bill", "utilisation", "power")


@dataclass(frozen=True)
class Figure:
    """A derived figure (or derived table) and the inputs it needs."""

    name: str
    label: str
    needs: tuple[str, ...]
    tables: tuple[str, ...]  # the derived tables that hold it (none: computed at query time)


FIGURES: dict[str, Figure] = {
    f.name: f
    for f in (
        Figure("idle_cost", "Idle GPU cost", ("bill", "utilisation"), ()),
        Figure("idle_gpu_hours", "Idle GPU-hours", ("bill", "utilisation"), ()),
        Figure("utilisation", "GPU utilisation", ("utilisation",), ()),
        Figure("energy", "Energy", ("power",), ("carbon_hourly",)),
        Figure("emissions", "Emissions", ("power",), ("carbon_hourly",)),
        Figure("unit_costs", "Unit costs of serving", ("bill", "serving"), ("serving_costs_hourly",)),
        Figure("allocation", "Shared-GPU allocation", ("bill", "utilisation"), ("gpu_allocation_hourly",)),
        Figure("attribution", "GPU-hour attribution", ("bill", "utilisation"), ()),
    )
}
