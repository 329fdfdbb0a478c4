"""Spark SQL text from names and values: identifiers in backticks, string literals escaped, and the
one parser of rendered (quoted) relation names. Every module that writes SQL uses these."""

from __future__ import annotations


def quote_ident(name: str) -> str:
    """Spark SQL identifier in backticks, with backticks inside doubled: safe for any legal name."""
    if not name:
        raise ValueError("an empty string is not a column name")
    return "`" + name.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    """Spark SQL string literal, with backslashes and single quotes escaped: safe for any text."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_string_or_null(value: str | None) -> str:
    """`sql_string`, or a typed null for None."""
    return "cast(null as string)" if value is None else sql_string(value)


def relation_parts(rendered: str) -> list[str]:
    """The parts of a rendered relation name: `db`.`t``x` -> [db, t`x]; unquoted parts as they are."""
    parts, current, quoted, index = [], [], False, 0
    while index < len(rendered):
        char = rendered[index]
        if char == "`" and quoted and rendered.startswith("``", index):
            current.append("`")
            index += 1
        elif char == "`":
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current).strip())
    return parts


def split_relation(relation: str) -> tuple[str, str]:
    """`schema.table` (either part may be in backticks) -> (schema, table); ValueError otherwise."""
    parts = relation_parts(relation)
    if len(parts) != 2 or not all(parts) or relation.count("`") % 2:
        raise ValueError(f"{relation!r} is not a relation of the form schema.table")
    return parts[0], parts[1]


def quoted_relation(schema: str, identifier: str) -> str:
    """`schema`.`identifier`."""
    return f"{quote_ident(schema)}.{quote_ident(identifier)}"
