"""Refuse files that carry a credential: private keys, cloud and API tokens, passwords in URLs,
and secrets written as literals in configuration (a dbt profile must read them with env_var()).

    python scripts/check_credentials.py [FILE ...]     (no FILE: every file git tracks)

A pre-commit hook (`.pre-commit-config.yaml`) runs it on the staged files. A line that must keep a
look-alike (a documented example) is allowed with the marker `pragma: allowlist secret` on it.
Exit status 1 and one line per finding (file, line, what) when something is found.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ALLOW_MARKER = "pragma: allowlist secret"

# Files that are credentials by their name alone.
SECRET_FILE_NAMES = re.compile(
    r"(^|/)(\.env(\.[\w-]+)?|id_(rsa|dsa|ecdsa|ed25519)|\.?credentials|\.netrc|\.pgpass"
    r"|[^/]+\.(pem|key|p12|pfx|jks|keystore|keytab|ppk))$"
)
SECRET_FILE_ALLOWED = re.compile(r"(^|/)\.env\.(example|sample|template)$")

# Patterns found anywhere in a text file.
TOKEN_PATTERNS: dict[str, re.Pattern[str]] = {
    "private key": re.compile(r"-----BEGIN ((RSA|DSA|EC|OPENSSH|PGP|ENCRYPTED) )?PRIVATE KEY( BLOCK)?-----"),
    "AWS access key id": re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    "AWS secret access key": re.compile(
        r"aws_?secret_?(access_?)?key['\"]?\s*[:=]\s*['\"]?[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])", re.IGNORECASE
    ),
    "GitHub token": re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})\b"),
    "Slack token": re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    "Google API key": re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    "password in a URL": re.compile(r"\b[a-z][a-z0-9+.\-]*://[^/\s:@'\"{}]+:[^/\s:@'\"{}$]+@", re.IGNORECASE),
}

# `key: value` / `key = value` in configuration files: a secret-named key with a literal value.
CONFIG_SUFFIXES = {".yml", ".yaml", ".ini", ".cfg", ".toml", ".properties", ".conf", ".json", ".env"}
SECRET_KEY = re.compile(
    r"""^\s*['"]?(?P<key>[\w.\-]*(password|passwd|pwd|secret|token|api_?key|private_?key|access_?key)[\w.\-]*)['"]?"""
    r"""\s*[:=]\s*(?P<value>.*?)\s*,?\s*$""",
    re.IGNORECASE,
)
# Values that are not a literal secret: empty, null, a reference to the environment, a template
# ({{ env_var(...) }}, GitHub Actions' ${{ secrets.X }}) or a <placeholder>.
NOT_A_LITERAL = re.compile(
    r"""^(['"]?\s*['"]?|null|none|~|true|false|\d+|['"]?\$?\{\{.*\}\}['"]?|['"]?\$\{?[\w:.\-]+\}?['"]?|['"]?<[^>]*>['"]?)$""",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def scan_text(path: str, text: str) -> list[Finding]:
    """Every credential-looking line of one file's text."""
    findings = []
    is_config = Path(path).suffix.lower() in CONFIG_SUFFIXES or Path(path).name.startswith(".env")
    for number, line in enumerate(text.splitlines(), start=1):
        if ALLOW_MARKER in line:
            continue
        for what, pattern in TOKEN_PATTERNS.items():
            if pattern.search(line):
                findings.append(Finding(path, number, what))
        if is_config:
            match = SECRET_KEY.match(line)
            if match and not NOT_A_LITERAL.match(match.group("value").split(" #")[0].strip()):
                what = f"literal value for '{match.group('key')}' (read it from the environment: env_var(), a secret)"
                findings.append(Finding(path, number, what))
    return findings


def scan_file(path: str) -> list[Finding]:
    posix = Path(path).as_posix()
    if SECRET_FILE_NAMES.search(posix) and not SECRET_FILE_ALLOWED.search(posix):
        return [Finding(posix, 0, "a credential file by its name: keep it out of git")]
    try:
        data = Path(path).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return []
    if b"\0" in data[:8192]:
        return []  # binary
    return scan_text(posix, data.decode("utf-8", errors="replace"))


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name]


def main(argv: Sequence[str] | None = None) -> int:
    paths: Iterable[str] = (list(sys.argv[1:]) if argv is None else list(argv)) or tracked_files()
    findings = [finding for path in paths for finding in scan_file(path)]
    for finding in findings:
        print(finding)
    if findings:
        print(
            f"{len(findings)} possible credential(s): remove them (read secrets from the environment), "
            f"or mark a false positive with '{ALLOW_MARKER}' on its line.",
            file=sys.stderr,
        )
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
