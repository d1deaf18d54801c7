"""The ``[dashboard]`` section as the loader parses it: declared in the dashboard's room
(``dashboard/settings.py``, which the Streamlit process parses the handed JSON with), its ValueError
naming the key raised as the loader's ConfigError."""

from __future__ import annotations

from typing import Any

from gpufinops.dashboard.settings import DashboardSettings, DashboardUser
from gpufinops.jobs.config_checks import ConfigError
from gpufinops.kernel.options import Section


def parse(section: Any) -> DashboardSettings:
    """``[dashboard]`` → DashboardSettings; every problem is a ConfigError naming the key."""
    try:
        return DashboardSettings.parse(section, "dashboard")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


SECTION = Section("dashboard", parse, (DashboardSettings, DashboardUser))
