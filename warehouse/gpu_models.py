"""Canonical GPU model names and the GPU reference table.

GPUs show up under many spellings: nvidia-smi names ("Tesla V100-SXM2-16GB",
"NVIDIA H100 80GB HBM3"), GCP accelerator types ("nvidia-tesla-a100"),
GCP billing SKU descriptions ("Nvidia Tesla T4 GPU attached to Spot
Preemptible VMs running in ...") and AWS ``GpuInfo`` names ("A10G").
:func:`normalize_gpu_model` maps all of these onto the canonical names in
:data:`CANONICAL_GPU_MODELS`. Those names are the keys of
``data/gpu_specs.csv``, which :func:`load_gpu_specs` reads.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from gpufinops.warehouse import reference_schema

logger = logging.getLogger(__name__)

CANONICAL_GPU_MODELS: tuple[str, ...] = (
    "T4",
    "L4",
    "A10G",
    "A10",
    "L40S",
    "A40",
    "V100-16GB",
    "V100-32GB",
    "P100",
    "A100-40GB",
    "A100-80GB",
    "H100-SXM",
    "H100-PCIe",
    "H200",
    "K80",
    "B200",
    "B300",
    "GB200",
    "GB300",
    "RTX-PRO-6000",
    "RTX-PRO-4500",
    "P4",
    "M60",
    "K520",
    "Radeon-Pro-V520",
    "MI300X",
)

GPU_SPECS_PATH: Path = Path(__file__).parent / "data" / "gpu_specs.csv"

GPU_SPECS_SCHEMA: pa.Schema = reference_schema.GPU_SPECS  # the warehouse table's own schema

# Thresholds for reported names that leave out the memory size ("A100", "V100").
_A100_80GB_MIN_MIB = 60_000.0
_V100_32GB_MIN_MIB = 24_000.0
# "RTX 6000" alone is ambiguous (Quadro RTX 6000 24 GB, RTX 6000 Ada 48 GB); the 96 GB part is the RTX PRO 6000.
_RTX_PRO_6000_MIN_MIB = 90_000.0

# Vendor and product-line words that carry no model information.
_NOISE = re.compile(r"^commitment v1:\s*|\b(?:nvidia|tesla)\b[\s-]*")
# GCP SKU descriptions: the model comes before " GPU running in ...", " GPU attached to ...".
_GPU_WORD = re.compile(r"\bgpu\b.*$")

# Models one name word identifies, in the order they are tried ("a10g" before "a10").
_NAMED_MODELS = (
    (r"\ba10g\b", "A10G"),
    (r"\ba10\b", "A10"),
    (r"\ba40\b", "A40"),
    (r"\bl40s\b", "L40S"),
    (r"\bl4\b", "L4"),
    (r"\bp100\b", "P100"),
    (r"\bt4g?\b", "T4"),
    (r"\bk80\b", "K80"),
    (r"\bp4\b", "P4"),
    (r"\bm60\b", "M60"),
    (r"\bk520\b", "K520"),
    (r"\bradeon[\s-]*pro[\s-]*v520\b", "Radeon-Pro-V520"),
    (r"\bmi300x\b", "MI300X"),
)


def _has(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


def normalize_gpu_model(name: str | None, memory_mib: float | None = None) -> str | None:
    """Map a reported GPU name to its canonical model name.

    Matching ignores case. Handles nvidia-smi names, GCP accelerator types
    and billing SKU descriptions, and AWS ``GpuInfo`` names.

    Args:
        name: The GPU name as a tool or cloud reported it.
        memory_mib: Memory per GPU in MiB, if known. Used only when the name
            leaves out the memory size ("A100", "V100"): at least 60000 MiB
            means A100-80GB, at least 24000 MiB means V100-32GB. Without it,
            the smaller variant is assumed.

    Returns:
        The canonical model name, ``None`` for a missing or blank name, or
        the input stripped of surrounding whitespace when it is not recognised.
    """
    if name is None:
        return None
    stripped = name.strip()
    if not stripped:
        return None

    text = _NOISE.sub("", stripped.lower().replace("_", "-"))
    text = _GPU_WORD.sub("", text).strip()

    blackwell = _blackwell_model(text)
    if blackwell is not None:
        return blackwell
    rtx_pro = _rtx_pro_model(text, memory_mib)
    if rtx_pro is not None:
        return rtx_pro if rtx_pro != "" else stripped
    sized = _variant_model(text, memory_mib)
    if sized is not None:
        return sized
    for pattern, model in _NAMED_MODELS:
        if _has(pattern, text):
            return model

    logger.debug("unrecognised GPU model name %r", stripped)
    return stripped


def _variant_model(text: str, memory_mib: float | None) -> str | None:
    """H200, and H100 / A100 / V100, whose variant the form factor or the memory size picks (the name's
    size, else ``memory_mib``, else the smaller part); None when none of them is named."""
    if _has(r"\bh200\b", text):
        return "H200"
    if _has(r"\bh100\b", text):
        return "H100-PCIe" if _has(r"\b(pcie|nvl)\b", text) else "H100-SXM"
    if _has(r"\ba100\b", text):
        return _memory_variant(text, memory_mib, ("A100", "40GB", "80GB"), _A100_80GB_MIN_MIB)
    if _has(r"\bv100\b", text):
        return _memory_variant(text, memory_mib, ("V100", "16GB", "32GB"), _V100_32GB_MIN_MIB)
    return None


def _memory_variant(text: str, memory_mib: float | None, sizes: tuple[str, str, str], big_min_mib: float) -> str:
    """``sizes`` = (family, small, big): the size the name says, else the one ``memory_mib`` reaches (the
    big one from ``big_min_mib``), else the small one."""
    family, small, big = sizes
    for size in (big, small):
        if _has(rf"\b{size.lower()}\b", text):
            return f"{family}-{size}"
    reaches_big = memory_mib is not None and memory_mib >= big_min_mib
    return f"{family}-{big if reaches_big else small}"


def _blackwell_model(text: str) -> str | None:
    """B200/B300 and their Grace superchip forms; GB200 is checked first ("gb200" contains "b200")."""
    for pattern, model in (
        (r"\bgb200\b", "GB200"),
        (r"\bgb300\b", "GB300"),
        (r"\bb200\b", "B200"),
        (r"\bb300\b", "B300"),
    ):
        if _has(pattern, text):
            return model
    return None


def _rtx_pro_model(text: str, memory_mib: float | None) -> str | None:
    """RTX PRO 6000/4500 (Blackwell); "" for an RTX 6000 that cannot be told from the older parts.

    Matches "RTX PRO 6000 Blackwell Server Edition", AWS's "RTX PRO Server 6000", GCP's
    "nvidia-rtx-pro-6000" and the billing SKU "RTX 6000 96GB"; returns None when no RTX 6000/4500 is named.
    """
    match = re.search(r"\brtx[\s-]*(pro[\s-]*)?(server[\s-]*)?(6000|4500)\b", text)
    if match is None:
        return None
    if match.group(1):
        return f"RTX-PRO-{match.group(3)}"
    big = _has(r"\b96\s*gb\b", text) or (memory_mib is not None and memory_mib >= _RTX_PRO_6000_MIN_MIB)
    return "RTX-PRO-6000" if match.group(3) == "6000" and big else ""


def load_gpu_specs(path: Path | None = None) -> pa.Table:
    """Read the GPU reference table with explicit column types.

    Args:
        path: A CSV to read instead of the bundled ``data/gpu_specs.csv``.

    Returns:
        A table with the columns and types of :data:`GPU_SPECS_SCHEMA`. Empty
        numeric fields (a capability the GPU lacks) are null.

    Raises:
        ValueError: If the CSV header differs from the expected columns.
    """
    csv_path = path if path is not None else GPU_SPECS_PATH
    table = pacsv.read_csv(
        csv_path,
        convert_options=pacsv.ConvertOptions(
            column_types={field.name: field.type for field in GPU_SPECS_SCHEMA},
            strings_can_be_null=False,
        ),
    )
    if table.column_names != GPU_SPECS_SCHEMA.names:
        raise ValueError(f"{csv_path}: expected columns {GPU_SPECS_SCHEMA.names}, got {table.column_names}")
    logger.debug("loaded %d GPU spec rows from %s", table.num_rows, csv_path)
    return table.cast(GPU_SPECS_SCHEMA)
