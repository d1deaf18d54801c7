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
from ingest.spec import OptionError

DEFAULT_WAREHOUSE = "data/gpufinops.duckdb"
DEFAULT_TAG_KEYS = ("team", "user:team", "user_team", "k8s_label_team")
ENV_PREFIX = "GPUFINOPS_"
TOP_LEVEL_SECTIONS = {"warehouse", "sources", "teams", "report", "api", "models", "jobs", "dashboard", "budgets",
                      "alerts", "export", "allocation"}
WAREHOUSE_KEYS = {"path", "memory_limit"}
COMMON_SOURCE_KEYS = {"type", "schedule", "enabled"}
ARRAY_SECTIONS = {"budgets"}  # top-level arrays of tables ([[budgets]]); every other section is a table


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
    report: Any = None                   # jobs.report.settings.ReportSettings ([report])
    jobs: Any = None                     # jobs.serve.JobSettings ([jobs])
    alerts: Any = None                   # jobs.alerts.settings.AlertConfig ([[budgets]], [alerts])
    warehouse_setting: str = "the default warehouse path"  # where warehouse_path came from (messages)
    export: Any = None                   # jobs.export.settings.ExportSettings ([export])
    allocation: Any = None               # warehouse.allocation.AllocationSettings ([allocation])

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


DASHBOARD_KEYS = {"auth", "header", "oidc_provider", "users", "monthly_budget_usd", "team_budgets", "stale_after_hours"}


def validate_dashboard(section: Any) -> None:
    """[dashboard]: auth = none|oidc|header, the trusted header, [[dashboard.users]] email/role/teams, budgets."""
    if not isinstance(section, dict):
        raise ConfigError("dashboard: must be a table")
    for option in section:
        if option not in DASHBOARD_KEYS:
            raise ConfigError(f"dashboard.{option}: unknown key (allowed: {', '.join(sorted(DASHBOARD_KEYS))})")
    auth = section.get("auth", "none")
    if auth not in ("none", "oidc", "header"):
        raise ConfigError(f"dashboard.auth: must be \"none\", \"oidc\" or \"header\", not {auth!r}")
    if auth == "header" and not (isinstance(section.get("header"), str) and section["header"].strip()):
        raise ConfigError("dashboard.header: required when dashboard.auth = \"header\" (e.g. \"X-Forwarded-Email\")")
    users = section.get("users", [])
    if not isinstance(users, list) or (auth != "none" and not users):
        raise ConfigError("dashboard.users: a list of [[dashboard.users]] tables is required when auth is on")
    for i, user in enumerate(users):
        key = f"dashboard.users[{i}]"
        if not isinstance(user, dict) or not isinstance(user.get("email"), str) or "@" not in user["email"]:
            raise ConfigError(f"{key}.email: missing or not an e-mail address")
        for option in user:
            if option not in ("email", "role", "teams"):
                raise ConfigError(f"{key}.{option}: unknown key (allowed: email, role, teams)")
        if user.get("role") not in ("finance", "lead"):
            raise ConfigError(f"{key}.role: must be \"finance\" or \"lead\"")
        teams = user.get("teams")
        if user["role"] == "lead" and (not isinstance(teams, list) or not teams
                                       or not all(isinstance(t, str) for t in teams)):
            raise ConfigError(f"{key}.teams: a lead needs a non-empty list of team names")
    for option in ("monthly_budget_usd", "stale_after_hours"):
        if option in section and (isinstance(section[option], bool) or not isinstance(section[option], (int, float))
                                  or section[option] < 0):
            raise ConfigError(f"dashboard.{option}: must be a non-negative number")
    budgets = section.get("team_budgets", {})
    if not isinstance(budgets, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in budgets.values()):
        raise ConfigError("dashboard.team_budgets: must be a table of team = non-negative number")


API_KEYS = {"tokens", "webhooks"}
API_TOKEN_KEYS = {"token_env", "role", "teams", "name"}
API_WEBHOOK_KEYS = {"url", "secret_env", "teams", "kinds", "timeout_s", "max_attempts", "batch_size"}


def _env_name(value: Any, key: str) -> None:
    if not isinstance(value, str) or not value.strip() or any(c in value for c in " =$"):
        raise ConfigError(f"{key}: missing or not an environment variable name")


def _team_list(value: Any, key: str, what: str = "team names") -> None:
    if not isinstance(value, list) or not value or not all(isinstance(t, str) and t for t in value):
        raise ConfigError(f"{key}: must be a non-empty list of {what}")


def validate_api(section: Any) -> None:
    """[api]: [[api.tokens]] (token_env, role, teams for a lead, optional name) and [[api.webhooks]]
    (url, secret_env, optional teams, kinds, timeout_s, max_attempts, batch_size)."""
    if not isinstance(section, dict):
        raise ConfigError("api: must be a table")
    for option in section:
        if option not in API_KEYS:
            raise ConfigError(f"api.{option}: unknown key (allowed: {', '.join(sorted(API_KEYS))})")
    for list_key, allowed in (("tokens", API_TOKEN_KEYS), ("webhooks", API_WEBHOOK_KEYS)):
        entries = section.get(list_key, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ConfigError(f"api.{list_key}: must be a list of [[api.{list_key}]] tables")
        for i, entry in enumerate(entries):
            for option in entry:
                if option not in allowed:
                    raise ConfigError(f"api.{list_key}[{i}].{option}: unknown key (allowed: {', '.join(sorted(allowed))})")
    for i, token in enumerate(section.get("tokens", [])):
        key = f"api.tokens[{i}]"
        _env_name(token.get("token_env"), f"{key}.token_env")
        if token.get("role") not in ("finance", "lead", "scheduler"):
            raise ConfigError(f"{key}.role: must be \"finance\", \"lead\" or \"scheduler\", not {token.get('role')!r}")
        if token["role"] == "lead":
            _team_list(token.get("teams"), f"{key}.teams")
        elif "teams" in token:
            raise ConfigError(f"{key}.teams: only a lead token is limited to teams ({token['role']} sees every team)")
        if "name" in token and not (isinstance(token["name"], str) and token["name"].strip()):
            raise ConfigError(f"{key}.name: must be a non-empty string")
    for i, hook in enumerate(section.get("webhooks", [])):
        key = f"api.webhooks[{i}]"
        url = hook.get("url")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise ConfigError(f"{key}.url: missing or not an http(s) URL")
        _env_name(hook.get("secret_env"), f"{key}.secret_env")
        if "teams" in hook:
            _team_list(hook["teams"], f"{key}.teams")
        if "kinds" in hook:
            _team_list(hook["kinds"], f"{key}.kinds", "recommendation kinds")
        for option, low in (("timeout_s", 0.1), ("max_attempts", 1), ("batch_size", 1)):
            value = hook.get(option)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < low):
                raise ConfigError(f"{key}.{option}: must be a number of at least {low}")


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
        if section in ARRAY_SECTIONS:
            if not isinstance(raw[section], list) or not all(isinstance(t, dict) for t in raw[section]):
                raise ConfigError(f"{section}: must be an array of tables ([[{section}]]), not {raw[section]!r}")
        elif not isinstance(raw[section], dict):
            raise ConfigError(f"{section}: must be a table ([{section}]), not {raw[section]!r}")
    base_dir = config_path.parent if config_path else Path.cwd()
    warehouse = raw.get("warehouse", {})
    for option in warehouse:
        if option not in WAREHOUSE_KEYS:
            raise ConfigError(f"warehouse.{option}: unknown key (allowed: {', '.join(sorted(WAREHOUSE_KEYS))})")
    path_value = db or warehouse.get("path", DEFAULT_WAREHOUSE)
    if not isinstance(path_value, str) or not path_value.strip():
        raise ConfigError(f"warehouse.path: must be a file path (a string), not {path_value!r}")
    memory_limit = warehouse.get("memory_limit", "2GB")
    if "memory_limit" in warehouse:
        _validate_memory_limit(memory_limit)
    warehouse_path = Path(path_value).expanduser()
    if not warehouse_path.is_absolute():
        warehouse_path = (Path.cwd() if db else base_dir) / warehouse_path
    setting = ("--db" if db else "GPUFINOPS_WAREHOUSE__PATH" if "GPUFINOPS_WAREHOUSE__PATH" in environ
               else f"warehouse.path in {config_path}" if "path" in warehouse else "the default warehouse path")
    sources = {name: _source(name, table, registry) for name, table in raw.get("sources", {}).items()}
    tag_keys = raw.get("teams", {}).get("tag_keys", list(DEFAULT_TAG_KEYS))
    if not isinstance(tag_keys, list) or not all(isinstance(k, str) for k in tag_keys):
        raise ConfigError("teams.tag_keys: must be a list of strings")
    validate_dashboard(raw.get("dashboard", {}))
    validate_api(raw.get("api", {}))
    from jobs import serve
    from jobs.alerts import settings as alert_settings
    from jobs.export import settings as export_settings
    from jobs.report import settings as report_settings
    from warehouse.allocation import AllocationSettings
    try:
        allocation = AllocationSettings.from_config(raw.get("allocation"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return Config(config_path, base_dir, warehouse_path, memory_limit,
                  sources, tuple(tag_keys), raw, report=report_settings.parse(raw.get("report")),
                  jobs=serve.parse_settings(raw.get("jobs")), alerts=alert_settings.parse(raw),
                  warehouse_setting=setting, export=export_settings.parse(raw.get("export")),
                  allocation=allocation)


def _validate_memory_limit(value: Any) -> None:
    """DuckDB's own parser decides (an in-memory connection, a few ms): "2GB", "512MiB", "80%"…"""
    import duckdb
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"warehouse.memory_limit: must be a memory size such as \"2GB\", not {value!r}")
    con = duckdb.connect()
    try:
        con.execute("SET memory_limit = '" + value.replace("'", "''") + "'")
    except duckdb.Error as exc:
        reason = str(exc).splitlines()[0].split("Error: ", 1)[-1]
        raise ConfigError(f"warehouse.memory_limit: {value!r} is not a memory size such as \"2GB\" ({reason})") from None
    finally:
        con.close()
