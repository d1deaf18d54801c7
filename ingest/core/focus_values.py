"""FOCUS 1.2 value sets the provider mappings share: service categories and units, as SQL.

* :data:`SUBCATEGORIES` is the spec's ServiceCategory → ServiceSubcategory table (FOCUS 1.2,
  ``servicesubcategory.md``; the validator's rule ServiceSubcategory-C-004-M lists the same pairs).
  Each mapping classifies a service by its **ServiceName alone** (:func:`service_sql`), so a
  ServiceName has exactly one ServiceCategory and one ServiceSubcategory (ServiceName-C-005-C,
  -C-008-C), and the subcategory always belongs to its category (ServiceSubcategory-C-004-M). A
  service no table knows is ``Other`` / ``Other (Other)``, the spec's catch-all.
* :func:`unit_sql` rewrites the providers' unit spellings (CUR ``Hrs``, ``GB-Mo``; the GCP export's
  ``hour``, ``gibibyte month``) into the spec's UnitFormat: ``Hours``, ``GB-Months``, ``GiB-Months``.
  A unit it does not know is kept as the provider wrote it.

Everything is plain SQL (CASE over literals, ``lower``, ``substr``, ``length``) so the push-down
transpiles it to Trino and BigQuery unchanged (:mod:`ingest.core.pushdown`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from gpufinops.ingest.core.files import sql_literal
from gpufinops.warehouse import column_types, cost_schema

SUBCATEGORIES: dict[str, tuple[str, ...]] = {
    "AI and Machine Learning": (
        "AI Platforms",
        "Bots",
        "Generative AI",
        "Machine Learning",
        "Natural Language Processing",
        "Other (AI and Machine Learning)",
    ),
    "Analytics": (
        "Analytics Platforms",
        "Business Intelligence",
        "Data Processing",
        "Search",
        "Streaming Analytics",
        "Other (Analytics)",
    ),
    "Business Applications": ("Productivity and Collaboration", "Other (Business Applications)"),
    "Compute": (
        "Containers",
        "End User Computing",
        "Quantum Compute",
        "Serverless Compute",
        "Virtual Machines",
        "Other (Compute)",
    ),
    "Databases": (
        "Caching",
        "Data Warehouses",
        "Ledger Databases",
        "NoSQL Databases",
        "Relational Databases",
        "Time Series Databases",
        "Other (Databases)",
    ),
    "Developer Tools": (
        "Developer Platforms",
        "Continuous Integration and Deployment",
        "Development Environments",
        "Source Code Management",
        "Quality Assurance",
        "Other (Developer Tools)",
    ),
    "Identity": ("Identity and Access Management", "Other (Identity)"),
    "Integration": ("API Management", "Messaging", "Workflow Orchestration", "Other (Integration)"),
    "Internet of Things": ("IoT Analytics", "IoT Platforms", "Other (Internet of Things)"),
    "Management and Governance": (
        "Architecture",
        "Compliance",
        "Cost Management",
        "Data Governance",
        "Disaster Recovery",
        "Endpoint Management",
        "Observability",
        "Support",
        "Other (Management and Governance)",
    ),
    "Media": ("Content Creation", "Gaming", "Media Streaming", "Mixed Reality", "Other (Media)"),
    "Migration": ("Data Migration", "Resource Migration", "Other (Migration)"),
    "Mobile": ("Other (Mobile)",),
    "Multicloud": ("Multicloud Integration", "Other (Multicloud)"),
    "Networking": (
        "Application Networking",
        "Content Delivery",
        "Network Connectivity",
        "Network Infrastructure",
        "Network Routing",
        "Network Security",
        "Other (Networking)",
    ),
    "Security": (
        "Secret Management",
        "Security Posture Management",
        "Threat Detection and Response",
        "Other (Security)",
    ),
    "Storage": (
        "Backup Storage",
        "Block Storage",
        "File Storage",
        "Object Storage",
        "Storage Platforms",
        "Other (Storage)",
    ),
    "Web": ("Application Platforms", "Other (Web)"),
    "Other": ("Other (Other)",),
}
OTHER = ("Other", "Other (Other)")

# Provider unit spellings (lower-cased) -> FOCUS UnitFormat. Whole values first; CUR's suffixes below.
UNITS: dict[str, str] = {
    # AWS CUR pricing_unit
    "hrs": "Hours",
    "hr": "Hours",
    "gb-mo": "GB-Months",
    "gb-month": "GB-Months",
    "iops-mo": "IOPS-Months",
    "tag-mo": "Tag-Months",
    "gibps-mo": "GiBps-Months",
    "lambda-gb-second": "GB-Seconds",
    "second": "Seconds",
    "seconds": "Seconds",
    "minute": "Minutes",
    "minutes": "Minutes",
    # GCP billing export usage.pricing_unit (the Cloud Billing Catalog's units)
    "hour": "Hours",
    "hours": "Hours",
    "month": "Months",
    "day": "Days",
    "byte": "B",
    "bytes": "B",
    "kibibyte": "KiB",
    "mebibyte": "MiB",
    "gibibyte": "GiB",
    "tebibyte": "TiB",
    "pebibyte": "PiB",
    "gibibyte hour": "GiB-Hours",
    "gibibyte month": "GiB-Months",
    "gibibyte day": "GiB-Days",
    "gibibyte second": "GiB-Seconds",
    "tebibyte month": "TiB-Months",
    "mebibyte second": "MiB-Seconds",
    "byte-seconds": "B-Seconds",
    "count": "Count",
    "request": "Requests",
    "requests": "Requests",
}
# CUR spells a rate's time unit as a suffix: "ReadCapacityUnit-Hrs", "LCU-Hrs", "IdleLCU-Hr", "…-Mo".
UNIT_SUFFIXES = (
    ("-Hrs", "-Hours"),
    ("-Hr", "-Hours"),
    ("-Mo", "-Months"),
    ("-mo", "-Months"),
    ("-Month", "-Months"),
    ("-Second", "-Seconds"),
    ("-second", "-Seconds"),
)
# Decorative signs in product names ("Red Hat® Enterprise Linux®", an AWS Marketplace product): FOCUS
# strings are checked to be ASCII, and the name reads the same without them.
DECORATIVE_SIGNS = ("®", "™", "©")


def subcategory_of(category: str, subcategory: str) -> tuple[str, str]:
    """(category, subcategory), checked against the spec's table (a typo fails at import, not in the data)."""
    if subcategory not in SUBCATEGORIES.get(category, ()):
        raise ValueError(f"{subcategory!r} is not a FOCUS 1.2 ServiceSubcategory of {category!r}")
    return category, subcategory


def service_sql(service_name: str, services: dict[str, tuple[str, str]], part: int, fallback: str | None = None) -> str:
    """ServiceCategory (``part`` 0) or ServiceSubcategory (1) of ``service_name`` (a SQL expression).

    ``services`` maps a ServiceName to (category, subcategory); ``fallback`` is an expression tried
    when the name is not in the table (it must itself depend on nothing but the ServiceName)."""
    whens = " ".join(f"WHEN {sql_literal(name)} THEN {sql_literal(pair[part])}" for name, pair in services.items())
    default = f"COALESCE({fallback}, {sql_literal(OTHER[part])})" if fallback else sql_literal(OTHER[part])
    return f"CASE {service_name} {whens} ELSE {default} END"


def unit_sql(unit: str) -> str:
    """The provider unit expression ``unit`` in the FOCUS UnitFormat (NULL stays NULL)."""
    whens = " ".join(f"WHEN {sql_literal(k)} THEN {sql_literal(v)}" for k, v in UNITS.items())
    suffixes = " ".join(
        f"WHEN {unit} LIKE {sql_literal('%' + old)} THEN substr({unit}, 1, length({unit}) - {len(old)}) || "
        f"{sql_literal(new)}"
        for old, new in UNIT_SUFFIXES
    )
    return f"CASE lower({unit}) {whens} ELSE CASE {suffixes} ELSE {unit} END END"


def plain_name_sql(name: str) -> str:
    """``name`` without the decorative signs of :data:`DECORATIVE_SIGNS` (plain REPLACE: every engine has it)."""
    for sign in DECORATIVE_SIGNS:
        name = f"replace({name}, {sql_literal(sign)}, '')"
    return name


def cost_line_items_select(outputs: Mapping[str, str], only: Collection[str] | None = None) -> list[str]:
    """A provider mapping's SELECT items: ``CAST(<SQL> AS <type>) AS "<column>"`` for every cost_line_items
    column, its SQL from ``outputs`` (NULL for a column it does not fill); the load's own ``x_Source`` and
    ``x_IngestRunId`` left out, and with ``only`` every column not in it."""
    return [
        f'CAST({outputs.get(field.name, "NULL")} AS {column_types.sql_type(field)}) AS "{field.name}"'
        for field in cost_schema.COST_LINE_ITEMS
        if field.name not in ("x_Source", "x_IngestRunId") and (only is None or field.name in only)
    ]
