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

Each section is a frozen dataclass of ``option()`` fields (docs/config.md, "How settings are declared")
owned by its feature, whose settings module contributes its ``SECTION``: the loader imports the modules
of :data:`SECTION_MODULES` by name, never a feature itself. The downstream packages' sections
(``[models]``, ``[allocation]``, ``[carbon]``, ``[unit_costs]``) are :func:`_owned_sections`.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.spec import OptionError, SourceOptions
from gpufinops.jobs.config_checks import ConfigError as ConfigError  # re-exported: the loader's error type
from gpufinops.jobs.config_checks import ConfigSection, validate_cron
from gpufinops.kernel.options import Section, option

if TYPE_CHECKING:  # the types of the sections (the loader imports none of them: SECTION_MODULES)
    from gpufinops.dashboard.settings import DashboardSettings
    from gpufinops.derived.allocation import AllocationSettings
    from gpufinops.derived.carbon_settings import CarbonSettings
    from gpufinops.derived.unit_costs import UnitCostSettings
    from gpufinops.jobs.alerts.settings import AlertConfig
    from gpufinops.jobs.api_settings import ApiSettings
    from gpufinops.jobs.enforce.settings import EnforceSettings
    from gpufinops.jobs.export.settings import ExportSettings
    from gpufinops.jobs.report.settings import ReportSettings
    from gpufinops.jobs.serve_settings import JobSettings
    from gpufinops.models.features import ModelSettings

DEFAULT_WAREHOUSE = "data/gpufinops.duckdb"
DEFAULT_TAG_KEYS = ("team", "user:team", "user_team", "k8s_label_team")
ENV_PREFIX = "GPUFINOPS_"
COMMON_SOURCE_KEYS = {"type", "schedule", "enabled"}
# The features' settings modules, each with its SECTION, in parse order (a section's ``needs`` come first)
SECTION_MODULES = (
    "gpufinops.jobs.dashboard_settings",
    "gpufinops.jobs.api_settings",
    "gpufinops.jobs.serve_settings",
    "gpufinops.jobs.report.settings",
    "gpufinops.jobs.alerts.settings",
    "gpufinops.jobs.export.settings",
    "gpufinops.jobs.enforce.settings",
)


def _path(value: Any, key: str) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: must be a file path (a string), not {value!r}")
    return value


def _memory_limit(value: Any, key: str) -> Any:
    """DuckDB's own parser decides (an in-memory connection, a few ms): "2GB", "512MiB", "80%"…"""
    import duckdb

    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f'{key}: must be a memory size such as "2GB", not {value!r}')
    con = duckdb.connect()
    try:
        con.execute("SET memory_limit = '" + value.replace("'", "''") + "'")
    except duckdb.Error as exc:
        reason = str(exc).splitlines()[0].split("Error: ", 1)[-1]
        raise ConfigError(f'{key}: {value!r} is not a memory size such as "2GB" ({reason})') from None
    finally:
        con.close()
    return value


def _tag_keys(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise ConfigError(f"{key}: must be a list of strings")
    return tuple(value)


@dataclass(frozen=True)
class WarehouseSettings(ConfigSection):
    """``[warehouse]``: where the DuckDB file is, and how much memory it may take."""

    path: str = option(
        DEFAULT_WAREHOUSE, "the warehouse file (relative: to the config file); --db overrides", check=_path
    )
    memory_limit: str = option("2GB", 'DuckDB\'s memory limit, e.g. "2GB" or "80%"', check=_memory_limit)


@dataclass(frozen=True)
class TeamsSettings(ConfigSection):
    """``[teams]``: the tags that name a resource's team."""

    tag_keys: tuple[str, ...] = option(
        DEFAULT_TAG_KEYS, "the tags naming the team, the first found wins", check=_tag_keys
    )


def _owned(parse: Callable[[Any], Any], name: str) -> Callable[[Any], Any]:
    """A section whose settings another package owns (and checks with a ValueError naming the key)."""

    def parsed(section: Any) -> Any:
        try:
            return parse(section)
        except ConfigError:
            raise
        except ValueError as exc:
            text = str(exc)  # the models say "[models] key …": the key as every other section names it
            raise ConfigError(
                f"{name}.{text[len(f'[{name}] ') :]}" if text.startswith(f"[{name}] ") else text
            ) from None

    return parsed


def _models(section: Any) -> ModelSettings | None:
    if section is None:  # importing every model takes seconds: only when there is a section to check
        return None
    from gpufinops.models.run import parse_settings

    return parse_settings(section)


def _owned_sections() -> tuple[Section, ...]:
    """The sections of the packages downstream (they cannot import jobs): their ValueError worded as every
    other section's ConfigError. [models] declares its keys on each model's settings (models.registry)."""
    from gpufinops.derived.allocation import AllocationSettings
    from gpufinops.derived.carbon_settings import CarbonSettings
    from gpufinops.derived.unit_costs import UnitCostSettings

    return (
        Section("allocation", _owned(AllocationSettings.from_config, "allocation"), (AllocationSettings,)),
        Section("carbon", _owned(CarbonSettings.from_config, "carbon"), (CarbonSettings,)),
        Section("unit_costs", _owned(UnitCostSettings.from_config, "unit_costs"), (UnitCostSettings,)),
        Section("models", _owned(_models, "models"), ()),
    )


def sections() -> tuple[Section, ...]:
    """Every section but [warehouse], [teams] and [sources] (the loader's own): the features' first."""
    import importlib

    return tuple(importlib.import_module(name).SECTION for name in SECTION_MODULES) + _owned_sections()


LOADER_TABLES = ("warehouse", "sources", "teams")  # the loader's own


def top_level_sections() -> frozenset[str]:
    """Every top-level name a config may hold."""
    return frozenset(LOADER_TABLES).union(*(section.names for section in sections()))


def __getattr__(name: str) -> Any:
    if name == "TOP_LEVEL_SECTIONS":  # the features' tables are known once their modules are read
        return top_level_sections()
    raise AttributeError(name)


@dataclass(frozen=True)
class SourceConfig:
    name: str
    type: str
    schedule: str
    parsed: SourceOptions  # the ingestor's Options instance, parsed once at load: what every reader reads
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
    models: ModelSettings | None = None  # [models], each model's settings parsed (None: every default)
    warehouse_setting: str = "the default warehouse path"  # where warehouse_path came from (messages)
    secret_env_names: tuple[str, ...] = ()  # every *_env key's variable: values scrubbed from all output
    carbon: CarbonSettings = field(default_factory=lambda: _owned_sections()[1].parse(None))  # [carbon]
    unit_costs: UnitCostSettings | None = None  # [unit_costs] (None: the defaults)
    enforce: EnforceSettings = field(default_factory=lambda: _enforce_default())  # [enforce]

    def secrets(self) -> list[str]:
        """Values of every environment variable the config names as holding a secret."""
        return [os.environ[n] for n in self.secret_env_names if os.environ.get(n)]


def _enforce_default() -> EnforceSettings:
    from gpufinops.jobs.enforce.settings import parse

    return parse(None)


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
    known = top_level_sections()
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        if parts[0] not in known:
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


def parse_source(name: str, table: Any, registry: Registry | None = None) -> SourceConfig:
    """One ``[sources.<name>]`` table, checked and parsed as the loader parses it (``registry``: the
    source types known, by default every registered one)."""
    if registry is None:
        from gpufinops.ingest.core.registry import default_registry

        registry = default_registry()
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
        parsed = meta.parse_options(table, key, frozenset(COMMON_SOURCE_KEYS))
    except OptionError as exc:
        raise ConfigError(str(exc)) from None
    schedule = table.get("schedule", meta.default_schedule)
    validate_cron(schedule, f"{key}.schedule")
    if "enabled" in table and not isinstance(table["enabled"], bool):
        raise ConfigError(f"{key}.enabled: must be true or false, not {table['enabled']!r}")
    return SourceConfig(name, source_type, schedule, parsed, bool(table.get("enabled", True)))


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


def _check_sections(raw: dict[str, Any], known: tuple[Section, ...]) -> None:
    names = top_level_sections()
    arrays = {name for section in known for name in section.arrays}
    for section in raw:
        if section not in names:
            raise ConfigError(f"{section}: unknown section (known: {', '.join(sorted(names))})")
        if section in arrays:
            if not isinstance(raw[section], list) or not all(isinstance(t, dict) for t in raw[section]):
                raise ConfigError(f"{section}: must be an array of tables ([[{section}]]), not {raw[section]!r}")
        elif not isinstance(raw[section], dict):
            raise ConfigError(f"{section}: must be a table ([{section}]), not {raw[section]!r}")


def _warehouse(
    section: dict[str, Any], base_dir: Path, config_path: Path | None, db: str | None, environ: dict[str, str]
) -> tuple[Path, str, str]:
    """``[warehouse]`` (and --db) → (the warehouse path, its memory limit, where the path was set)."""
    settings = WarehouseSettings.parse(section, "warehouse")
    warehouse_path = Path(db or settings.path).expanduser()
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
    return warehouse_path, settings.memory_limit, setting


def _sections(raw: dict[str, Any], known: tuple[Section, ...]) -> dict[str, Any]:
    """Each section's typed settings, by its Config attribute (a section's ``needs`` parsed before it)."""
    parsed: dict[str, Any] = {}
    for section in known:
        parsed[section.attr] = section.parse(
            *(raw.get(name) for name in section.names), **{need: parsed[need] for need in section.needs}
        )
    return parsed


def _parse(
    raw: dict[str, Any], config_path: Path | None, *, db: str | None, registry: Registry | None, environ: dict[str, str]
) -> Config:
    from gpufinops.ingest.core.registry import default_registry

    known = sections()
    _check_sections(raw, known)
    base_dir = config_path.parent if config_path else Path.cwd()
    warehouse_path, memory_limit, setting = _warehouse(raw.get("warehouse", {}), base_dir, config_path, db, environ)
    registry = registry or default_registry()
    sources = {name: parse_source(name, table, registry) for name, table in raw.get("sources", {}).items()}
    teams = TeamsSettings.parse(raw.get("teams", {}), "teams")
    names: list[str] = []
    _collect_env_names(raw, names)
    return Config(
        config_path,
        base_dir,
        warehouse_path,
        memory_limit,
        sources,
        teams.tag_keys,
        warehouse_setting=setting,
        secret_env_names=tuple(dict.fromkeys(names)),
        **_sections(raw, known),
    )
