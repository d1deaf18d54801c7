"""The provider codes (aws, gcp, azure, oci, onprem), and the one mapping from a bill's ProviderName to them.

A FOCUS ``ProviderName`` is a display name ("Amazon Web Services", "AWS", "Google Cloud", "Microsoft",
"Oracle", "onprem"); catalogues, recommendations and exports use the short code. ``provider_code``
maps a name in Python, ``provider_sql`` in SQL, both from ``NEEDLES`` (the first needle the lower-cased
name contains decides; a name none contains is its own code, lower-cased). A source spec's ``provider``
fact (ingest/core/registry.py) is one of ``PROVIDERS``.
"""

from __future__ import annotations

# code -> what it names (the codes the catalogues, the recommendations and the exports use)
PROVIDERS: dict[str, str] = {
    "aws": "Amazon Web Services",
    "gcp": "Google Cloud",
    "azure": "Microsoft Azure",
    "oci": "Oracle Cloud Infrastructure",
    "onprem": "a private GPU cluster (the onprem source)",
}
CLOUD_PROVIDERS = ("aws", "gcp", "azure", "oci")  # the public clouds: on-demand, spot and commitment prices

# (needle in the lower-cased ProviderName, code), tried in order
NEEDLES: tuple[tuple[str, str], ...] = (
    ("amazon", "aws"),
    ("aws", "aws"),
    ("google", "gcp"),
    ("gcp", "gcp"),
    ("microsoft", "azure"),
    ("azure", "azure"),
    ("oracle", "oci"),
    ("onprem", "onprem"),
    ("on-prem", "onprem"),
)


def provider_code(provider_name: str | None) -> str | None:
    """FOCUS ProviderName → its provider code (aws | gcp | azure | oci | onprem | the name, lower-cased);
    None for no name."""
    if not provider_name:
        return None
    name = provider_name.lower()
    return next((code for needle, code in NEEDLES if needle in name), name)


def provider_sql(lowered: str) -> str:
    """``provider_code`` as SQL, over a lower-cased ProviderName expression (an empty name stays empty)."""
    cases = " ".join(f"WHEN contains({lowered}, '{needle}') THEN '{code}'" for needle, code in NEEDLES)
    return f"CASE {cases} ELSE {lowered} END"
