"""The TOML config (docs/config.md), with GPUFINOPS_* environment overrides, validated at start-up.

Precedence: built-in defaults < the file (``--config``, else ``$GPUFINOPS_CONFIG``, else
``./gpufinops.toml`` when present) < ``GPUFINOPS_<SECTION>__<KEY>`` variables (``__`` separates the
levels, e.g. ``GPUFINOPS_WAREHOUSE__PATH`` or ``GPUFINOPS_SOURCES__AWS__BUCKET``) < ``--db``.
Every section is parsed and validated here, once, into a typed frozen settings object on ``Config``
(``cfg.report``, ``cfg.jobs``, ``cfg.api``, ``cfg.dashboard``, …): every command loads the whole config
before it runs anything, so a typo in any section (``[models]`` too) stops every command at start-up.
Every problem is one ``ConfigError`` naming the key at fault, and where it was set (the file or the
environment variable); the CLI exits 2 on it. Secrets are never in the file: it names the
environment variables that hold them (``*_env`` keys).

Each section's settings live beside the feature that uses them (``jobs.report.settings``,
``jobs.serve_settings``, ``jobs.api_settings``, …) and import nothing that imports this loader (their
``ConfigError`` comes from the leaf ``jobs.config_checks``): the loader imports them, never the daemon
nor the delivery code. ``[models]`` and ``[allocation]`` belong to the packages that read them
(``models.run.validate_settings``, ``warehouse.allocation``), which check them here too.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.spec import OptionError
from gpufinops.jobs.config_checks import ConfigError as ConfigError  # re-exported: the loader's error type
from gpufinops.jobs.config_checks import check_table, validate_cron

if TYPE_CHECKING:
    from gpufinops.jobs.alerts.settings import AlertConfig
    from gpufinops.jobs.api_settings import ApiSettings
    from gpufinops.jobs.dashboard_settings import DashboardSettings
    from gpufinops.jobs.export.settings import ExportSettings
    from gpufinops.jobs.report.settings import ReportSettings
    from gpufinops.jobs.serve_settings import JobSettings
    from gpufinops.warehouse.allocation import AllocationSettings
    from gpufinops.warehouse.carbon_settings import CarbonSettings
    from gpufinops.warehouse.unit_costs import UnitCostSettings

DEFAULT_WAREHOUSE = "data/gpufinops.duckdb"
DEFAULT_TAG_KEYS = ("team", "user:team", "user_team", "k8s_label_team")
ENV_PREFIX = "GPUFINOPS_"
TOP_LEVEL_SECTIONS = {
    "warehouse",
    "sources",
    "teams",
    "report",
    "api",
    "models",
    "jobs",
    "dashboard",
    "budgets",
    "alerts",
    "export",
    "allocation",
    "carbon",
    "unit_costs",
}
WAREHOUSE_KEYS = {"path", "memory_limit"}
TEAMS_KEYS = {"tag_keys"}
COMMON_SOURCE_KEYS = {"type", "schedule", "enabled"}
ARRAY_SECTIONS = {"budgets"}  # top-level arrays of tables ([[budgets]]); every other section is a table
_T = TypeVar("_T")


@dataclass(frozen=True)
class SourceConfig:
    name: str
    type: str
    schedule: str
    options: dict[str, Any]
    enabled: bool = True


@dataclass(frozen=True)
class Config:
    path: Path | None  # the file read, if any
    base_dir: Path  # relative paths in the file are relative to this
    warehouse_path: Path
    memory_limit: str
    sources: dict[str, SourceConfig]
    team_tag_keys: tuple[str, ...]  # [teams] tag_keys
    report: ReportSettings  # [report]
    jobs: JobSettings  # [jobs]
    alerts: AlertConfig  # [[budgets]], [alerts] (and the [dashboard] budget aliases)
    export: ExportSettings  # [export]
    allocation: AllocationSettings  # [allocation]
    api: ApiSettings  # [api]
    dashboard: DashboardSettings  # [dashboard]
    # [models] as written and checked by models.run.validate_settings: each model parses its own settings from it
    models: dict[str, Any] | None = None
    warehouse_setting: str = "the default warehouse path"  # where warehouse_path came from (messages)
    secret_env_names: tuple[str, ...] = ()  # every *_env key's variable: values scrubbed from all output
    carbon: CarbonSettings = field(default_factory=lambda: _carbon_defaults())  # [carbon]
    unit_costs: UnitCostSettings | None = None  # [unit_costs] (None: the defaults)

    def secrets(self) -> list[str]:
        """Values of every environment variable the config names as holding a secret."""
        return [os.environ[n] for n in self.secret_env_names if os.environ.get(n)]


def _collect_env_names(node: Any, out: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith("_env") and isinstance(value, str):
                out.append(value)
            else:
                _collect_env_names(value, out)
    elif isinstance(node, list):
        for item in node:
            _collect_env_names(item, out)


def _parse_env_value(text: str) -> Any:
    """A TOML literal when it parses as one (numbers, booleans, arrays), else the plain string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _apply_env_overrides(raw: dict[str, Any], environ: dict[str, str]) -> dict[str, str]:
    """Set every ``GPUFINOPS_<SECTION>__<KEY>`` into ``raw``; returns {dotted key: variable} of those set."""
    applied: dict[str, str] = {}
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        if parts[0] not in TOP_LEVEL_SECTIONS:
            continue
        node = raw
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment variable {name}: {'.'.join(parts[:-1])} is not a table")
        node[parts[-1]] = _parse_env_value(value)
        applied[".".join(parts)] = name
    return applied


def _origin(message: str, config_path: Path | None, overrides: dict[str, str]) -> str | None:
    """Where the key a ConfigError names was set: the environment variable that set it, else the file."""
    named = re.match(r"[^\s:]+", message)
    key = re.sub(r"\[\d+\]", "", named.group(0)) if named else ""
    for dotted, variable in overrides.items():
        if key == dotted or key.startswith(dotted + ".") or dotted.startswith(key + "."):
            return f"environment variable {variable}"
    return str(config_path) if config_path else None


def _source(name: str, table: Any, registry: Registry) -> SourceConfig:
    key = f"sources.{name}"
    if not isinstance(table, dict):
        raise ConfigError(f"{key}: must be a table")
    source_type = table.get("type")
    if not source_type:
        raise ConfigError(f"{key}.type: missing required key")
    if source_type not in registry:
        raise ConfigError(f"{key}.type: unknown source type {source_type!r} (known: {', '.join(registry.names())})")
    meta = registry.get(source_type).meta
    try:  # keys, types and cross-field rules, all derived from the ingestor's Options
        meta.parse_options(table, key, frozenset(COMMON_SOURCE_KEYS))
    except OptionError as exc:
        raise ConfigError(str(exc)) from None
    schedule = table.get("schedule", meta.default_schedule)
    validate_cron(schedule, f"{key}.schedule")
    if "enabled" in table and not isinstance(table["enabled"], bool):
        raise ConfigError(f"{key}.enabled: must be true or false, not {table['enabled']!r}")
    options = {k: v for k, v in table.items() if k not in COMMON_SOURCE_KEYS}
    return SourceConfig(name, source_type, schedule, options, bool(table.get("enabled", True)))


def load(
    path: str | os.PathLike | None = None,
    *,
    db: str | None = None,
    registry: Registry | None = None,
    environ: dict[str, str] | None = None,
) -> Config:
    """Read, override and validate the whole config; raises ConfigError naming the key at fault (and,
    in its ``origin``, the file or the environment variable that set it)."""
    environ = dict(os.environ if environ is None else environ)
    chosen = path or environ.get("GPUFINOPS_CONFIG") or ("gpufinops.toml" if Path("gpufinops.toml").exists() else None)
    config_path = Path(chosen).resolve() if chosen else None
    raw = _read(chosen, config_path)
    overrides = _apply_env_overrides(raw, environ)
    try:
        return _parse(raw, config_path, db=db, registry=registry, environ=environ)
    except ConfigError as exc:
        exc.origin = _origin(str(exc), config_path, overrides)
        raise


def _read(chosen: str | os.PathLike | None, config_path: Path | None) -> dict[str, Any]:
    if config_path is None:
        return {}
    if config_path.exists() and not config_path.is_file() and not config_path.is_dir():  # a FIFO would block
        raise ConfigError(f"config file {chosen} is not a regular file")
    try:
        return tomllib.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {chosen} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {chosen} is a directory, not a TOML file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {chosen} is not UTF-8 text (byte {exc.start}): not a TOML file") from None
    except OSError as exc:  # permissions, I/O
        raise ConfigError(f"config file {chosen} can not be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {chosen} is not valid TOML: {exc}") from None


def _check_sections(raw: dict[str, Any]) -> None:
    for section in raw:
        if section not in TOP_LEVEL_SECTIONS:
            raise ConfigError(f"{section}: unknown section (known: {', '.join(sorted(TOP_LEVEL_SECTIONS))})")
        if section in ARRAY_SECTIONS:
            if not isinstance(raw[section], list) or not all(isinstance(t, dict) for t in raw[section]):
                raise ConfigError(f"{section}: must be an array of tables ([[{section}]]), not {raw[section]!r}")
        elif not isinstance(raw[section], dict):
            raise ConfigError(f"{section}: must be a table ([{section}]), not {raw[section]!r}")


def _warehouse(
    section: dict[str, Any], base_dir: Path, config_path: Path | None, db: str | None, environ: dict[str, str]
) -> tuple[Path, str, str]:
    """``[warehouse]`` (and --db) → (the warehouse path, its memory limit, where the path was set)."""
    check_table(section, "warehouse", WAREHOUSE_KEYS)
    path_value = db or section.get("path", DEFAULT_WAREHOUSE)
    if not isinstance(path_value, str) or not path_value.strip():
        raise ConfigError(f"warehouse.path: must be a file path (a string), not {path_value!r}")
    memory_limit = section.get("memory_limit", "2GB")
    if "memory_limit" in section:
        _validate_memory_limit(memory_limit)
    warehouse_path = Path(path_value).expanduser()
    if not warehouse_path.is_absolute():
        warehouse_path = (Path.cwd() if db else base_dir) / warehouse_path
    setting = (
        "--db"
        if db
        else "GPUFINOPS_WAREHOUSE__PATH"
        if "GPUFINOPS_WAREHOUSE__PATH" in environ
        else f"warehouse.path in {config_path}"
        if "path" in section
        else "the default warehouse path"
    )
    return warehouse_path, memory_limit, setting


def _team_tag_keys(section: dict[str, Any]) -> tuple[str, ...]:
    check_table(section, "teams", TEAMS_KEYS)
    tag_keys = section.get("tag_keys", list(DEFAULT_TAG_KEYS))
    if not isinstance(tag_keys, list) or not all(isinstance(k, str) for k in tag_keys):
        raise ConfigError("teams.tag_keys: must be a list of strings")
    return tuple(tag_keys)


def _owned_by_a_package(parse: Callable[[Any], _T], section: Any, name: str) -> _T:
    """A section whose settings another package owns (and checks with a ValueError naming the key)."""
    try:
        return parse(section)
    except ConfigError:
        raise
    except ValueError as exc:
        text = str(exc)  # the models say "[models] key …": the key as every other section names it
        raise ConfigError(f"{name}.{text[len(f'[{name}] ') :]}" if text.startswith(f"[{name}] ") else text) from None


def _parse(
    raw: dict[str, Any], config_path: Path | None, *, db: str | None, registry: Registry | None, environ: dict[str, str]
) -> Config:
    from gpufinops.ingest.core.registry import default_registry
    from gpufinops.jobs import api_settings, dashboard_settings, serve_settings
    from gpufinops.jobs.alerts import settings as alert_settings
    from gpufinops.jobs.export import settings as export_settings
    from gpufinops.jobs.report import settings as report_settings
    from gpufinops.warehouse.allocation import AllocationSettings
    from gpufinops.warehouse.unit_costs import UnitCostSettings

    _check_sections(raw)
    base_dir = config_path.parent if config_path else Path.cwd()
    warehouse_path, memory_limit, setting = _warehouse(raw.get("warehouse", {}), base_dir, config_path, db, environ)
    registry = registry or default_registry()
    sources = {name: _source(name, table, registry) for name, table in raw.get("sources", {}).items()}
    tag_keys = _team_tag_keys(raw.get("teams", {}))
    dashboard = dashboard_settings.parse(raw.get("dashboard"))
    api = api_settings.parse(raw.get("api"))
    allocation = _owned_by_a_package(AllocationSettings.from_config, raw.get("allocation"), "allocation")
    carbon = _owned_by_a_package(_carbon_defaults().from_config, raw.get("carbon"), "carbon")
    unit_cost_settings = _owned_by_a_package(UnitCostSettings.from_config, raw.get("unit_costs"), "unit_costs")
    if raw.get("models") is not None:  # importing every model takes seconds: only when there is a section to check
        from gpufinops.models.run import validate_settings as validate_models

        _owned_by_a_package(validate_models, raw["models"], "models")
    names: list[str] = []
    _collect_env_names(raw, names)
    return Config(
        config_path,
        base_dir,
        warehouse_path,
        memory_limit,
        sources,
        tag_keys,
        report=report_settings.parse(raw.get("report")),
        jobs=serve_settings.parse(raw.get("jobs")),
        alerts=alert_settings.parse(raw.get("budgets"), raw.get("alerts"), dashboard),
        export=export_settings.parse(raw.get("export")),
        allocation=allocation,
        api=api,
        dashboard=dashboard,
        models=raw.get("models"),
        warehouse_setting=setting,
        secret_env_names=tuple(dict.fromkeys(names)),
        carbon=carbon,
        unit_costs=unit_cost_settings,
    )


def _carbon_defaults() -> CarbonSettings:
    from gpufinops.warehouse.carbon_settings import CarbonSettings

    return CarbonSettings()


def _validate_memory_limit(value: Any) -> None:
    """DuckDB's own parser decides (an in-memory connection, a few ms): "2GB", "512MiB", "80%"…"""
    import duckdb

    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f'warehouse.memory_limit: must be a memory size such as "2GB", not {value!r}')
    con = duckdb.connect()
    try:
        con.execute("SET memory_limit = '" + value.replace("'", "''") + "'")
    except duckdb.Error as exc:
        reason = str(exc).splitlines()[0].split("Error: ", 1)[-1]
        raise ConfigError(f'warehouse.memory_limit: {value!r} is not a memory size such as "2GB" ({reason})') from None
    finally:
        con.close()
