"""The lint tooling itself: the sqlfluff configuration (.sqlfluff) enforces docs/contributing.md ("SQL style") and
renders the project's models without a warehouse; the credential check (scripts/check_credentials.py) and
the docs coverage check (python_hooks.commands.docs_coverage.check, what scripts/check_docs_coverage.py runs) find
what they exist to find, and only that.
No Spark here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.paths import PROJECT
from python_hooks.commands.docs_coverage import check as docs_coverage
from scripts import check_credentials

# The SQL example of docs/contributing.md (jaffle-shop): the rules must accept it as it is.
STYLE_EXAMPLE = """with

changes as (

    select * from {{ ref('stg_salesdb__customer') }}

),

latest as (

    select
        changes.*,
        row_number() over (
            partition by changes.id
            order by changes._cdc_ts desc, changes._cdc_seq desc
        ) as change_rank

    from changes

)

select * from latest
where change_rank = 1
"""

OFF_STYLE = """SELECT
    id
    , UPPER(name) name
FROM {{ ref('stg_salesdb__customer') }} c
"""


@pytest.fixture(scope="module")
def linter():
    from sqlfluff.core import FluffConfig, Linter

    return Linter(config=FluffConfig.from_path(str(PROJECT)))


def violations(linter, sql: str, path: str) -> set[str]:
    result = linter.lint_string(sql, fname=str(PROJECT / path))
    return {violation.rule_code() for violation in result.get_violations()}


def test_style_example_is_lint_clean(linter):
    assert violations(linter, STYLE_EXAMPLE, "models/marts/style_example.sql") == set()


def test_off_style_sql_is_refused(linter):
    found = violations(linter, OFF_STYLE, "models/marts/off_style.sql")
    # upper-case keywords and functions, leading comma, implicit column and table aliases
    assert {"CP01", "CP03", "LT04", "AL02", "AL01"} <= found, found


@pytest.mark.parametrize(
    ("model", "rendered"),
    [
        ("models/current_state/crm/crm__customer_master.sql", "select * from stg_crm__customer_master"),
        ("models/staging/crm/stg_crm__customer_master.sql", "select 1 as _cdc_placeholder"),
        ("models/staging/inventory/stg_inventory__product.sql", "select 1 as _cdc_placeholder"),
    ],
)
def test_generator_models_render_as_dbt_parses_them(linter, model, rendered):
    """One-line models render without a warehouse (execute is false), as dbt renders them at parse."""
    path = PROJECT / model
    result = linter.lint_string(path.read_text(), fname=str(path))
    assert not [v for v in result.get_violations() if v.rule_code() in {"TMP", "PRS"}]
    assert result.tree is not None and result.tree.raw.strip() == rendered


def secret(*parts: str) -> str:
    """Credential-shaped test data, assembled here so that this file holds none."""
    return "".join(parts)


@pytest.mark.parametrize(
    ("name", "text", "what"),
    [
        ("key.txt", secret("-----BEGIN ", "RSA PRIVATE KEY-----\nMIIE\n"), "private key"),
        ("notes.md", "id " + secret("AKIA", "IOSFODNN7EXAMPLE"), "AWS access key id"),
        ("x.py", "token = '" + secret("ghp_", "a" * 36) + "'", "GitHub token"),
        ("profiles.yml", "url: " + secret("jdbc:hive2://", "etl:", "hunter2@", "db:10000/"), "password in a URL"),
        ("profiles.yml", "      password: " + secret("hun", "ter2"), "literal value for 'password'"),
        ("conf.toml", 'api_key = "' + secret("sk-", "live-0123456789") + '"', "literal value for 'api_key'"),
    ],
)
def test_credentials_are_found(name, text, what):
    findings = check_credentials.scan_text(name, text)
    assert [f for f in findings if what in f.what], findings


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("profiles.yml", "      password: \"{{ env_var('THRIFT_PASSWORD') }}\""),
        ("ci.yml", "          github-token: ${{ github.token }}"),
        ("ci.yml", "      token: ${{ secrets.DEPLOY_TOKEN }}"),
        ("settings.ini", "password = ${DB_PASSWORD}"),
        ("settings.ini", "password ="),
        ("README.md", "password: hunter2  # documented example, pragma: allowlist secret"),
        ("models/x.sql", "select password_hash from users"),
    ],
)
def test_references_and_allowlisted_lines_pass(name, text):
    assert check_credentials.scan_text(name, text) == []


def test_credential_files_are_refused_by_name(tmp_path):
    for name in [".env", "id_rsa", "service.pem", "prod.keytab"]:
        path = tmp_path / name
        path.write_text("x\n")
        assert check_credentials.scan_file(str(path)), name
    example = tmp_path / ".env.example"
    example.write_text("DB_PASSWORD=\n")
    assert check_credentials.scan_file(str(example)) == []


def test_the_repository_has_no_credentials():
    assert check_credentials.main([str(p) for p in tracked_or_new_files()]) == 0


def tracked_or_new_files() -> list[Path]:
    import subprocess

    names = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=PROJECT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [PROJECT / name for name in names.split("\0") if name and (PROJECT / name).is_file()]


def test_docs_coverage_finds_each_kind_of_gap(tmp_path):
    def node(resource_type, name, description, columns):
        return {
            "resource_type": resource_type,
            "package_name": "p",
            "original_file_path": f"models/{name}.sql",
            "description": description,
            "columns": {c: {"description": d} for c, d in columns.items()},
        }

    manifest = {
        "metadata": {"project_name": "p"},
        "nodes": {
            "model.p.ok": node("model", "ok", "described", {"id": "the key"}),
            "model.p.bare": node("model", "bare", "", {"id": ""}),
            "snapshot.p.snap": node("snapshot", "snap", " ", {}),
            "test.p.not_null_x": node("test", "not_null_x", "", {}),
        },
        "sources": {
            "source.p.raw.t": {
                "package_name": "p",
                "source_name": "raw",
                "original_file_path": "models/_raw__sources.yml",
                "source_description": "",
                "description": "a table",
                "columns": {"c": {"description": ""}},
            }
        },
        "exposures": {"exposure.p.dash": {"package_name": "p", "description": ""}},
    }
    catalog = {"nodes": {"model.p.ok": {"columns": {"id": {}, "extra": {}}}}, "sources": {}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    coverage = docs_coverage(tmp_path)
    assert coverage.warnings == [], "no schema evolution log: no column is excused"
    assert coverage.gaps == [
        "model.p.bare (models/bare.sql): no description",
        "model.p.bare: column id has no description",
        "snapshot.p.snap (models/snap.sql): no description",
        "source raw (models/_raw__sources.yml): no description",
        "source.p.raw.t: column c has no description",
        "exposure.p.dash: no description",
        "model.p.ok: column extra (in the warehouse) is not in the yml",
    ]
