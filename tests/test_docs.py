"""The documentation (README.md, the site under docs/): tables that describe options are generated from the
code and checked (as Datasette does), every command a page gives runs as written, and the site builds strictly."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpufinops.ingest.core import docs
from gpufinops.ingest.core.registry import default_registry
from gpufinops.jobs import docs_tables

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SOURCES_PAGE = DOCS / "sources" / "index.md"  # the generated source table
# every page a user or contributor reads: the front page, the site, and a folder's own README (models/, bench/)
FOLDER_READMES = [
    p
    for p in sorted(ROOT.glob("*/README.md"))
    if p.parent.name in ("bench", "tests") or (p.parent / "__init__.py").is_file()
]
PAGES = [README, *sorted(DOCS.rglob("*.md")), *FOLDER_READMES]


def test_the_source_table_is_the_one_the_specs_generate():
    expected = docs.source_table()
    assert docs.readme_block(SOURCES_PAGE.read_text()) == expected, (
        "docs/sources/index.md's source table drifted from the ingestor specs: run "
        "`.venv/bin/python -m gpufinops.ingest.core.docs --write docs/sources/index.md` and commit the result"
    )


@pytest.mark.parametrize("table", docs_tables.TABLES, ids=lambda t: t.name)
def test_every_generated_table_is_the_one_the_specs_generate(table):
    assert table.block((ROOT / table.page).read_text()) == table.render(), (
        f"{table.page}'s {table.name} drifted from the specs: run `make docs-tables` and commit the result"
    )


def test_the_generated_tables_hold_every_registered_source_and_kind():
    from gpufinops.models import registry

    freshness = docs_tables.freshness_table()
    for name in default_registry().names():
        assert freshness.count(f"`{name}`") == 1, name
    kinds = docs_tables.kind_table()
    assert [line.split("|")[1].strip() for line in kinds.splitlines()[2:]] == [f"`{k}`" for k in registry.KINDS]


def test_every_kind_is_described_in_detail_on_the_site():
    """Beside the generated facts, each kind's rules in prose: the models page's detail table, or the storage
    page for the storage family."""
    from gpufinops.models import registry

    models_page, storage_page = (DOCS / "models.md").read_text(), (DOCS / "storage.md").read_text()
    detail = models_page.split("What each finds, in detail", 1)[1].split("\n## ", 1)[0]
    missing = [
        s.kind
        for s in registry.MODELS
        if f"| `{s.kind}` |" not in detail and not (s.family == "storage" and f"`{s.kind}`" in storage_page)
    ]
    assert missing == []


def test_a_drifted_generated_table_is_caught_and_rewritten(tmp_path):
    for table in docs_tables.TABLES:
        page = tmp_path / table.page
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"# x\n\n{table.begin}\n| an old hand-copied table |\n{table.end}\n\nafter\n")
    assert docs_tables.drifted(tmp_path) == list(docs_tables.TABLES)
    check = [sys.executable, "-m", "gpufinops.jobs.docs_tables", "--check", "--root", str(tmp_path)]
    assert subprocess.run(check, capture_output=True, cwd=ROOT).returncode == 1
    subprocess.run([*check[:3], "--write", "--root", str(tmp_path)], check=True, cwd=ROOT, capture_output=True)
    assert docs_tables.drifted(tmp_path) == []
    assert subprocess.run(check, capture_output=True, cwd=ROOT).returncode == 0
    for table in docs_tables.TABLES:
        text = (tmp_path / table.page).read_text()
        assert text.startswith("# x\n") and text.endswith("after\n")


def test_the_table_lists_every_source_type_with_its_keys():
    table = docs.source_table()
    registry = default_registry()
    rows = [line for line in table.splitlines()[2:]]
    assert [row.split("|")[1].strip() for row in rows] == [f"`{name}`" for name in registry.names()]
    prometheus = next(row for row in rows if row.startswith("| `prometheus`"))
    assert "`url`; optional" in prometheus and "`lookback_hours` (3)" in prometheus and "`7 * * * *`" in prometheus


def test_a_drifted_page_is_caught_and_rewritten(tmp_path):
    stale = tmp_path / "index.md"
    stale.write_text(f"# x\n\n{docs.BEGIN}\n| `type` | an old hand-copied table |\n{docs.END}\n\nafter\n")
    assert docs.readme_block(stale.read_text()) != docs.source_table()
    subprocess.run([sys.executable, "-m", "gpufinops.ingest.core.docs", "--write", str(stale)], check=True, cwd=ROOT)
    text = stale.read_text()
    assert docs.readme_block(text) == docs.source_table() and text.startswith("# x\n") and text.endswith("after\n")


def test_one_type_reference_prints_types_defaults_and_descriptions():
    out = subprocess.run(
        [sys.executable, "-m", "gpufinops.ingest.core.docs", "cloudwatch_gpu"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert "  region (a string; required): " in out
    assert "  lookback_hours (a number; default 3): " in out
    bad = subprocess.run(
        [sys.executable, "-m", "gpufinops.ingest.core.docs", "nope"], capture_output=True, text=True, cwd=ROOT
    )
    assert bad.returncode == 2 and "unknown source type 'nope'" in bad.stderr


def _table_after(heading: str, page: Path) -> list[list[str]]:
    """The cells of the first Markdown table after the line starting with ``heading`` in ``page``."""
    lines = page.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[first + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_command_table_lists_every_cli_command_and_no_other():
    import argparse

    from gpufinops.interfaces import cli

    parser = cli._parser()  # noqa: SLF001
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    documented = {cells[0].strip("`").split()[1] for cells in _table_after("| command | does |", DOCS / "commands.md")}
    assert documented == set(sub.choices)


def test_the_daemon_table_gives_the_code_s_default_schedules():
    from gpufinops.jobs.serve_settings import DEFAULT_FEED, DEFAULT_RECOMMEND, DEFAULT_REPORT

    rows = {cells[0].strip("`"): cells[1] for cells in _table_after("| job | default schedule |", DOCS / "serve.md")}
    for job, cron in (("recommend", DEFAULT_RECOMMEND), ("report", DEFAULT_REPORT), ("feed", DEFAULT_FEED)):
        assert rows[job].startswith(f"`{cron}`"), (job, rows[job])


SHELL_FENCES = ("sh", "bash", "shell", "console", "")


def page_commands(text: str) -> list[str]:
    """The shell commands a page gives: lines of its shell code blocks and inline code spans that
    start like a command (``.venv/bin/``, ``make``, ``python``, ``pip``), comments dropped."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    fence = re.compile(r"^```([\w-]*)\n(.*?)^```", flags=re.M | re.S)
    lines = [
        line.strip().removeprefix("$ ")
        for lang, body in fence.findall(text)
        if lang in SHELL_FENCES
        for line in body.splitlines()
    ]
    spans = re.findall(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", fence.sub("", text), flags=re.S)  # `a`, ``a`b``
    lines += [" ".join(span.split()) for _, span in spans]
    commands = [re.sub(r"\s+#.*", "", line).strip() for line in lines]
    # a program named alone (`.venv/bin/gpufinops`) is a name in a sentence, not a command to run
    return [c for c in commands if re.match(r"(\.venv/bin/|make |python3? |pip )", c) and " " in c]


def _make_problem(words: list[str]) -> str | None:
    targets = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    missing = [w for w in words[1:] if "=" not in w and w not in targets]
    return f"no make target {missing[0]!r}" if missing else None


def _install_problem(command: str) -> str | None:
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for spec in re.findall(r"(?:^|gpufinops|\.)\[([\w,-]+)\]", command):
        unknown = set(spec.split(",")) - extras
        if unknown:
            return f"no extra {sorted(unknown)[0]!r} in pyproject.toml"
    return None


def _python_problem(words: list[str]) -> str | None:
    import importlib.util

    if words[1:2] == ["-m"]:
        return None if importlib.util.find_spec(words[2]) else f"no module {words[2]!r}"
    return None if (ROOT / words[1]).is_file() else f"no file {words[1]!r}"


def _gpufinops_problem(words: list[str]) -> str | None:
    from gpufinops.interfaces import cli

    if any(w in ("…", "COMMAND") for w in words):  # the usage line: its options must exist
        options = {o for a in cli._parser()._actions for o in a.option_strings}  # noqa: SLF001
        flags = [w.strip("[]") for w in words[1:] if w.startswith("[-")]
        strange = [f for f in flags if f not in options]
        return f"no option {strange[0]!r}" if strange else None
    try:
        cli._parser().parse_args(words[1:])  # noqa: SLF001
    except SystemExit:
        return "gpufinops does not accept these arguments"
    return None


def command_problem(command: str) -> str | None:
    """Why a documented command would not run as written in a clone after `make install`, or None."""
    import shlex

    words = shlex.split(command)
    if words[0] in ("python", "python3"):
        return "a bare `python` has no gpufinops in a clone: write `.venv/bin/python`"
    if words[0] == "make":
        return _make_problem(words)
    words[0] = words[0].removeprefix(".venv/bin/")
    if words[0] in ("pip", "python") and "install" in words:
        return _install_problem(command)
    if words[0] == "python":
        return _python_problem(words)
    if words[0] == "gpufinops":
        return _gpufinops_problem(words)
    if not (Path(sys.executable).parent / words[0]).exists():
        return f"no {words[0]!r} in .venv/bin"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_command_a_page_gives_names_what_exists(page):
    """`python -m gpufinops.ingest.core.docs` and `python docs/capture_screenshots.py` once stood in
    the README: no `python` on a clone's PATH has gpufinops. Every make target, module, script, extra
    and gpufinops command a page's command names exists."""
    problems = {c: p for c in page_commands(page.read_text()) if (p := command_problem(c))}
    assert not problems, problems


def test_the_pages_give_commands_and_the_readme_its_two():
    """The check above reads commands where they are: a parser that found none would pass vacuously."""
    commands = [c for page in PAGES for c in page_commands(page.read_text())]
    assert len(commands) > 60 and sum(c.startswith(".venv/bin/gpufinops ") for c in commands) > 20
    readme = page_commands(README.read_text())
    assert "make demo" in readme and "make test" in readme  # CI reads the test command from the README
    assert any(c.startswith(".venv/bin/gpufinops --config demo/gpufinops.toml ") for c in readme)


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("python -m gpufinops.ingest.core.docs", "a bare `python`"),
        ("make demos", "no make target 'demos'"),
        (".venv/bin/python -m gpufinops.ingest.core.nodocs", "no module"),
        (".venv/bin/python docs/capture_screenshot.py", "no file"),
        (".venv/bin/pip install -e '.[aws,gpc]'", "no extra 'gpc'"),
        (".venv/bin/gpufinops recomend", "does not accept"),
        (".venv/bin/gpufinops [--confg PATH] COMMAND …", "no option '--confg'"),
    ],
)
def test_a_broken_command_is_caught(command, problem):
    assert problem in (command_problem(command) or "")


# ---- the site --------------------------------------------------------------------------------------

MD_NAME = re.compile(r"(?<![\w/.-])((?:\.\./|\./)?[\w][\w./-]*\.md)\b")  # a Markdown document a page names
CLIMB = re.compile(r"(?<![\w/.])((?:\.\./)+[\w][\w./-]*)")  # a relative path that climbs folders


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mkdocs", reason="mkdocs is the docs extra (`make check` and `make test` install it)")
    pytest.importorskip("material", reason="mkdocs-material is the docs extra")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_strictly(tmp_path):
    """`mkdocs build --strict`: no broken link or anchor, every page in the nav (mkdocs.yml's validation)."""
    built = _mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0 and "WARNING" not in built.stderr, built.stderr[-3000:]
    assert (tmp_path / "site" / "sources" / "index.html").is_file()
    assert (tmp_path / "site" / "screenshots" / "dashboard-overview.png").is_file()


def test_a_broken_anchor_or_a_page_outside_the_nav_fails_the_build(tmp_path):
    """The strict build can fail: a copy of the site with a link to a missing anchor and a page the nav omits."""
    copy = tmp_path / "repo"
    shutil.copytree(DOCS, copy / "docs", ignore=shutil.ignore_patterns("screenshots", "*.py"))
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "docs" / "orphan.md").write_text("# Orphan\n\n[commands](commands.md#no-such-section)\n")
    built = _mkdocs_build(copy / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "orphan.md" in built.stderr and "no-such-section" in built.stderr, built.stderr[-3000:]


def outside_citations(page: Path, text: str) -> list[str]:
    """A page's names of documents the repository does not hold, and relative paths that leave it."""
    tracked = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    documents = {Path(f).name for f in tracked} | {p.name for p in PAGES}
    problems = [
        f"{page.name}: names {name}, which is not a document of the repository"
        for name in MD_NAME.findall(text)
        if Path(name).name not in documents
    ]
    for path in CLIMB.findall(text):
        resolved = (page.parent / path).resolve()
        if not resolved.exists() or ROOT not in (resolved, *resolved.parents):
            problems.append(f"{page.name}: {path} is not a path of the repository")
    return problems


def test_the_citation_check_can_fail():
    page = ROOT / "docs" / "index.md"
    planted = "as the notes say (../outside/NOTES.md, ../../elsewhere); [c](commands.md) docs/config.md"
    found = outside_citations(page, planted)
    assert len(found) == 3 and not outside_citations(page, "[c](commands.md), docs/config.md, ../README.md"), found


def test_the_docs_cite_nothing_outside_the_repository():
    """Every relative link of every page resolves inside the repository, and no page names a document
    kept outside it."""
    link = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
    problems: list[str] = []
    for page in [*PAGES, ROOT / "mkdocs.yml"]:
        text = page.read_text()
        problems += outside_citations(page, text)
        for target in link.findall(text):
            if "://" in target or target.startswith("mailto:"):
                problems.append(f"{page.name}: links outside the repository: {target}")
                continue
            resolved = (page.parent / target).resolve()
            if not resolved.exists() or ROOT not in (resolved, *resolved.parents):
                problems.append(f"{page.name}: {target} is not a file of the repository")
    assert not problems, problems
