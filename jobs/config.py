"""The TOML config (CONTRACT.md), with GPUFINOPS_* environment overrides, validated at start-up.

Precedence: built-in defaults < the file (``--config``, else ``$GPUFINOPS_CONFIG``, else
``./gpufinops.toml`` when present) < ``GPUFINOPS_<SECTION>__<KEY>`` variables (``__`` separates the
levels, e.g. ``GPUFINOPS_WAREHOUSE__PATH`` or ``GPUFINOPS_SOURCES__AWS__BUCKET``) < ``--db``.
Every problem is one ``ConfigError`` naming the key at fault; the CLI exits 2 on it. Secrets are
never in the file: it names the environment variables that hold them (``*_env`` keys).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest.registry import Registry

DEFAULT_WAREHOUSE = "data/gpufinops.duckdb"
DEFAULT_TAG_KEYS = ("team", "user:team", "user_team", "k8s_label_team")
ENV_PREFIX = "GPUFINOPS_"
TOP_LEVEL_SECTIONS = {"warehouse", "sources", "teams", "report", "api", "models", "jobs", "dashboard"}
WAREHOUSE_KEYS = {"path", "memory_limit"}
COMMON_SOURCE_KEYS = {"type", "schedule", "enabled"}


class ConfigError(ValueError):
    """A bad config: the message names the key."""


@dataclass(frozen=True)
class SourceConfig:
    name: str
    type: str
    schedule: str
    options: dict[str, Any]
    enabled: bool = True


@dataclass
class Config:
    path: Path | None                    # the file read, if any
    base_dir: Path                       # relative paths in the file are relative to this
    warehouse_path: Path
    memory_limit: str
    sources: dict[str, SourceConfig]
    team_tag_keys: tuple[str, ...]
    raw: dict[str, Any] = field(default_factory=dict)

    def secrets(self) -> list[str]:
        """Values of every environment variable the config names as holding a secret."""
        names: list[str] = []
        _collect_env_names(self.raw, names)
        return [os.environ[n] for n in names if os.environ.get(n)]


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


def _apply_env_overrides(raw: dict[str, Any], environ: dict[str, str]) -> None:
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX):].split("__")]
        if parts[0] not in TOP_LEVEL_SECTIONS:
            continue
        node = raw
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment variable {name}: {'.'.join(parts[:-1])} is not a table")
        node[parts[-1]] = _parse_env_value(value)


def validate_cron(expression: str, key: str) -> None:
    from apscheduler.triggers.cron import CronTrigger

    if not isinstance(expression, str) or len(expression.split()) != 5:
        raise ConfigError(f"{key}: invalid cron expression {expression!r} (expected 5 fields: minute hour day month weekday)")
    try:
        CronTrigger.from_crontab(expression, timezone="UTC")
    except ValueError as exc:
        raise ConfigError(f"{key}: invalid cron expression {expression!r}: {exc}") from None


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
    for required in meta.required_keys:
        if required not in table:
            raise ConfigError(f"{key}.{required}: missing required key for source type {source_type}")
    allowed = COMMON_SOURCE_KEYS | set(meta.required_keys) | set(meta.optional_keys)
    for option in table:
        if option not in allowed:
            raise ConfigError(f"{key}.{option}: unknown key for source type {source_type} "
                              f"(allowed: {', '.join(sorted(allowed))})")
    schedule = table.get("schedule", meta.default_schedule)
    validate_cron(schedule, f"{key}.schedule")
    options = {k: v for k, v in table.items() if k not in COMMON_SOURCE_KEYS}
    return SourceConfig(name, source_type, schedule, options, bool(table.get("enabled", True)))


def load(path: str | os.PathLike | None = None, *, db: str | None = None, registry: Registry | None = None,
         environ: dict[str, str] | None = None) -> Config:
    """Read, override and validate the config; raises ConfigError naming the key at fault."""
    from ingest.registry import default_registry

    environ = dict(os.environ if environ is None else environ)
    registry = registry or default_registry()
    chosen = path or environ.get("GPUFINOPS_CONFIG") or ("gpufinops.toml" if Path("gpufinops.toml").exists() else None)
    raw: dict[str, Any] = {}
    config_path = None
    if chosen:
        config_path = Path(chosen).resolve()
        try:
            raw = tomllib.loads(config_path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {chosen} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {chosen} is not valid TOML: {exc}") from None
    _apply_env_overrides(raw, environ)
    for section in raw:
        if section not in TOP_LEVEL_SECTIONS:
            raise ConfigError(f"{section}: unknown section (known: {', '.join(sorted(TOP_LEVEL_SECTIONS))})")
    base_dir = config_path.parent if config_path else Path.cwd()
    warehouse = raw.get("warehouse", {})
    for option in warehouse:
        if option not in WAREHOUSE_KEYS:
            raise ConfigError(f"warehouse.{option}: unknown key (allowed: {', '.join(sorted(WAREHOUSE_KEYS))})")
    warehouse_path = Path(db or warehouse.get("path", DEFAULT_WAREHOUSE)).expanduser()
    if not warehouse_path.is_absolute():
        warehouse_path = (Path.cwd() if db else base_dir) / warehouse_path
    sources = {name: _source(name, table, registry) for name, table in raw.get("sources", {}).items()}
    tag_keys = raw.get("teams", {}).get("tag_keys", list(DEFAULT_TAG_KEYS))
    if not isinstance(tag_keys, list) or not all(isinstance(k, str) for k in tag_keys):
        raise ConfigError("teams.tag_keys: must be a list of strings")
    return Config(config_path, base_dir, warehouse_path, str(warehouse.get("memory_limit", "2GB")),
                  sources, tuple(tag_keys), raw)
