"""The optional extras (``aws``, ``gcp``, ``azure``, ``dashboard``) and the one sentence a missing one gets.

The cloud SDKs and Streamlit are optional installs, imported only where they are used. When one is
missing the error names the extra and the exact command, for a clone of the repository and for a
pip install, e.g. ``aws_cur: reading S3 needs boto3, which is not installed: install the 'aws'
extra (in a clone: `make install`, or `.venv/bin/pip install -e '.[aws]'`; with pip: `pip install
'gpufinops[aws]'`).`` The ``doctor`` command reads ``EXTRAS`` to report what is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

# extra -> (import name, distribution name) of what it installs; pyproject.toml's extras list the same
EXTRAS: dict[str, tuple[tuple[str, str], ...]] = {
    "aws": (("boto3", "boto3"),),
    "gcp": (
        ("google.cloud.bigquery", "google-cloud-bigquery"),
        ("google.cloud.billing_v1", "google-cloud-billing"),
        ("google.auth", "google-auth"),
    ),
    "azure": (("azure.storage.blob", "azure-storage-blob"), ("azure.identity", "azure-identity")),
    "dashboard": (("streamlit", "streamlit"), ("authlib", "Authlib")),
    "gcp-storage": (
        ("google.cloud.compute_v1", "google-cloud-compute"),
        ("google.cloud.storage", "google-cloud-storage"),
    ),
}
DISTRIBUTIONS = {module: dist for modules in EXTRAS.values() for module, dist in modules}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message says how to install it."""


def install_hint(extra: str) -> str:
    return (
        f"install the '{extra}' extra (in a clone: `make install`, or `.venv/bin/pip install -e '.[{extra}]'`; "
        f"with pip: `pip install 'gpufinops[{extra}]'`)"
    )


def missing_message(what: str, module: str, extra: str) -> str:
    """``<what> needs <package>, which is not installed: install the '<extra>' extra (…)``."""
    return f"{what} needs {DISTRIBUTIONS.get(module, module)}, which is not installed: {install_hint(extra)}"


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package (``google``) is missing
        return False


def missing_modules(extra: str) -> list[str]:
    """The distributions of ``extra`` that are not installed (empty: the extra is complete)."""
    return [dist for module, dist in EXTRAS[extra] if not installed(module)]


def require(module: str, extra: str, what: str) -> ModuleType:
    """``import module``, or MissingExtra with the install sentence."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(missing_message(what, module, extra)) from None
