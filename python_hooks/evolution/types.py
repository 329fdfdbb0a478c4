"""Types of raw columns and table columns, and how they relate. Pure: no Spark, no I/O.

Arrow types read from Parquet footers become Spark SQL types (`spark_type`); Spark type strings, as
`DESCRIBE TABLE` prints them or as `spark_type` writes them, are parsed into one canonical form
(`normalize_type`) and compared (`compare_types`): `same`, `narrower` (fits), `promote` (a promotion
Iceberg allows: int -> bigint, float -> double, decimal(P,S) -> decimal(P2,S) with P2 > P) or `refuse`.
The rules: docs/sources.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from python_hooks.project.sql import quote_ident

logger = logging.getLogger(__name__)

Relation = Literal["same", "narrower", "promote", "refuse"]

ALLOWED_PROMOTIONS = "int -> bigint, float -> double, decimal(P,S) -> decimal(P2,S) with P2 > P"


class UnsupportedTypeError(ValueError):
    """An Arrow type that has no Spark SQL / Iceberg equivalent."""


# ------------------------------------------------------------------------------------ Arrow -> Spark

_SIMPLE_TYPES: tuple[tuple[pa.DataType, str], ...] = (
    (pa.int8(), "tinyint"),
    (pa.int16(), "smallint"),
    (pa.int32(), "int"),
    (pa.int64(), "bigint"),
    (pa.uint8(), "smallint"),
    (pa.uint16(), "int"),
    (pa.uint32(), "bigint"),
    (pa.uint64(), "decimal(20,0)"),
    (pa.float16(), "float"),
    (pa.float32(), "float"),
    (pa.float64(), "double"),
    (pa.string(), "string"),
    (pa.large_string(), "string"),
    (pa.binary(), "binary"),
    (pa.large_binary(), "binary"),
    (pa.bool_(), "boolean"),
    (pa.date32(), "date"),
    (pa.date64(), "date"),
)


def spark_type(arrow_type: pa.DataType) -> str | None:
    """The Spark SQL type (DDL) of an Arrow type read from a Parquet footer.

    None for the null type, and for a nested type with a null type inside (`list<null>`): a file that
    only ever held nulls says nothing about the type yet, so the column is skipped until one does.
    Raises UnsupportedTypeError for types Spark/Iceberg cannot hold (time, duration, interval, ...).
    """
    for arrow, spark in _SIMPLE_TYPES:
        if arrow_type.equals(arrow):
            return spark
    if pa.types.is_null(arrow_type):
        return None
    if pa.types.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if pa.types.is_fixed_size_binary(arrow_type):
        return "binary"
    if pa.types.is_timestamp(arrow_type):
        if arrow_type.unit == "ns":  # Spark 3.5 refuses Parquet's TIMESTAMP(NANOS) ("Illegal Parquet type")
            raise UnsupportedTypeError(
                f"Arrow type {arrow_type} (a Parquet timestamp in nanoseconds) cannot be read by Spark 3.5:"
                " write timestamps in microseconds or milliseconds"
            )
        return "timestamp"
    if pa.types.is_dictionary(arrow_type) and pa.types.is_string(arrow_type.value_type):
        return "string"
    if pa.types.is_dictionary(arrow_type) and pa.types.is_large_string(arrow_type.value_type):
        return "string"
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        element = spark_type(arrow_type.value_type)
        return None if element is None else f"array<{element}>"
    if pa.types.is_map(arrow_type):
        key, item = spark_type(arrow_type.key_type), spark_type(arrow_type.item_type)
        return None if key is None or item is None else f"map<{key},{item}>"
    if pa.types.is_struct(arrow_type):
        if arrow_type.num_fields == 0:
            raise UnsupportedTypeError(f"Arrow type {arrow_type} (a struct without fields) has no Spark type")
        parts = []
        for field in arrow_type:
            child = spark_type(field.type)
            if child is None:
                return None
            parts.append(f"{quote_ident(field.name)}:{child}")
        return f"struct<{','.join(parts)}>"
    raise UnsupportedTypeError(f"Arrow type {arrow_type} has no Spark SQL / Iceberg equivalent")


# ------------------------------------------------------------------------------- Spark type strings

_ALIASES = {
    "integer": "int",
    "long": "bigint",
    "short": "smallint",
    "byte": "tinyint",
    "real": "float",
    "dec": "decimal",
    "numeric": "decimal",
    "bool": "boolean",
    "timestamp_ltz": "timestamp",
}
_INT_RANK = {"tinyint": 0, "smallint": 1, "int": 2, "bigint": 3}
_FLOAT_RANK = {"float": 0, "double": 1}
_TIMESTAMPS = frozenset({"timestamp", "timestamp_ntz"})


@dataclass(frozen=True)
class _Type:
    """A parsed Spark type. `args`: decimal (p, s); array (element,); map (key, value);
    struct ((lower-case field name, type), ...); other types their integer arguments (varchar(10))."""

    name: str
    args: tuple = ()

    def render(self) -> str:
        if self.name == "array":
            return f"array<{self.args[0].render()}>"
        if self.name == "map":
            return f"map<{self.args[0].render()},{self.args[1].render()}>"
        if self.name == "struct":
            return "struct<" + ",".join(f"{name}:{t.render()}" for name, t in self.args) + ">"
        if self.args:
            return f"{self.name}({','.join(str(a) for a in self.args)})"
        return self.name


class _ParseError(ValueError):
    pass


class _TypeParser:
    """Recursive descent over `struct<a:int,b:array<decimal(18,4)>>`; field names bare or `quoted`."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def parse(self) -> _Type:
        parsed = self._type()
        if self._peek():
            raise _ParseError(f"unexpected text at {self._pos} in {self._text!r}")
        return parsed

    def _peek(self) -> str:
        while self._pos < len(self._text) and self._text[self._pos].isspace():
            self._pos += 1
        return self._text[self._pos] if self._pos < len(self._text) else ""

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            raise _ParseError(f"expected {char!r} at {self._pos} in {self._text!r}")
        self._pos += 1

    def _word(self) -> str:
        self._peek()
        start = self._pos
        while self._pos < len(self._text) and (self._text[self._pos].isalnum() or self._text[self._pos] == "_"):
            self._pos += 1
        if start == self._pos:
            raise _ParseError(f"expected a name at {start} in {self._text!r}")
        return self._text[start : self._pos]

    def _int(self) -> int:
        word = self._word()
        if not word.isdigit():
            raise _ParseError(f"expected a number, got {word!r} in {self._text!r}")
        return int(word)

    def _type(self) -> _Type:
        words = [self._word().lower()]
        if words[0] == "array":
            self._expect("<")
            element = self._type()
            self._expect(">")
            return _Type("array", (element,))
        if words[0] == "map":
            self._expect("<")
            key = self._type()
            self._expect(",")
            value = self._type()
            self._expect(">")
            return _Type("map", (key, value))
        if words[0] == "struct":
            return self._struct()
        while self._peek().isalpha():  # interval day to second
            words.append(self._word().lower())
        name = " ".join(words)
        name = _ALIASES.get(name, name)
        args: list[int] = []
        if self._peek() == "(":
            self._pos += 1
            args.append(self._int())
            while self._peek() == ",":
                self._pos += 1
                args.append(self._int())
            self._expect(")")
        if name == "decimal":
            if len(args) > 2:
                raise _ParseError(f"bad decimal arguments in {self._text!r}")
            precision = args[0] if args else 10
            scale = args[1] if len(args) > 1 else 0
            return _Type("decimal", (precision, scale))
        return _Type(name, tuple(args))

    def _struct(self) -> _Type:
        self._expect("<")
        fields: list[tuple[str, _Type]] = []
        if self._peek() == ">":
            self._pos += 1
            return _Type("struct", ())
        while True:
            name = self._field_name()
            self._expect(":")
            fields.append((name.lower(), self._type()))
            if self._peek() == ",":
                self._pos += 1
                continue
            self._expect(">")
            return _Type("struct", tuple(fields))

    def _field_name(self) -> str:
        if self._peek() == "`":
            self._pos += 1
            chars: list[str] = []
            while True:
                if self._pos >= len(self._text):
                    raise _ParseError(f"unclosed backtick in {self._text!r}")
                char = self._text[self._pos]
                if char == "`" and self._text.startswith("``", self._pos):
                    chars.append("`")
                    self._pos += 2
                elif char == "`":
                    self._pos += 1
                    return "".join(chars)
                else:
                    chars.append(char)
                    self._pos += 1
        # A bare name, as DESCRIBE prints it: everything up to the colon.
        end = self._text.find(":", self._pos)
        name = self._text[self._pos : end].strip() if end >= 0 else ""
        if not name or any(char in name for char in "<>,`"):
            raise _ParseError(f"cannot read a struct field name at {self._pos} in {self._text!r}")
        self._pos = end
        return name


def _parse(spark_type_string: str) -> _Type:
    return _TypeParser(spark_type_string).parse()


def holds_map(spark_type_string: str) -> bool:
    """Whether a Spark type holds a map, at any depth (a struct field named `map<` is not one)."""

    def walk(parsed: _Type) -> bool:
        if parsed.name == "map":
            return True
        if parsed.name == "array":
            return walk(parsed.args[0])
        if parsed.name == "struct":
            return any(walk(field) for _, field in parsed.args)
        return False

    return walk(_parse(spark_type_string))


def normalize_type(spark_type_string: str) -> str:
    """Canonical form of a Spark type string, as DESCRIBE TABLE prints it, in lower case, no spaces.

    'DECIMAL(18, 4)' -> 'decimal(18,4)', 'INTEGER' -> 'int', 'struct<`A`: LONG>' -> 'struct<a:bigint>'.
    """
    try:
        return _parse(spark_type_string).render()
    except _ParseError as error:
        logger.debug("type %r not parsed (%s); normalizing it as text", spark_type_string, error)
        text = "".join(spark_type_string.lower().split())
        return _ALIASES.get(text, "decimal(10,0)" if text == "decimal" else text)


@dataclass(frozen=True)
class TypeComparison:
    """How an incoming type relates to a table's type: `same`, `narrower` (fits: nothing to do),
    `promote` (an Iceberg promotion widens the table) or `refuse` (`reason` says why)."""

    relation: Relation
    reason: str = ""


def compare_types(table_type: str, incoming_type: str) -> TypeComparison:
    """Compare two Spark type strings (any spelling `normalize_type` reads) by the plan's rules."""
    try:
        old, new = _parse(table_type), _parse(incoming_type)
    except _ParseError:
        if normalize_type(table_type) == normalize_type(incoming_type):
            return TypeComparison("same")
        return TypeComparison("refuse", f"the types {table_type!r} and {incoming_type!r} cannot be compared")
    return _compare(old, new)


def _compare(old: _Type, new: _Type) -> TypeComparison:
    if old == new or (old.name in _TIMESTAMPS and new.name in _TIMESTAMPS):
        # timestamp vs timestamp_ntz: Spark 3.4+ reads tz-naive Parquet timestamps as timestamp_ntz, and
        # an Arrow footer does not tell Spark's choice; Spark casts between the two on write.
        return TypeComparison("same")
    if old.name in _INT_RANK and new.name in _INT_RANK:
        if _INT_RANK[new.name] < _INT_RANK[old.name]:
            return TypeComparison("narrower")
        # Iceberg stores tinyint and smallint as int, so int -> bigint is the widening that exists.
        return TypeComparison("promote")
    if old.name in _FLOAT_RANK and new.name in _FLOAT_RANK:
        return TypeComparison("narrower" if new.name == "float" else "promote")
    if old.name == "decimal" and new.name == "decimal":
        (old_precision, old_scale), (new_precision, new_scale) = old.args, new.args
        if old_scale != new_scale:
            return TypeComparison(
                "refuse",
                f"the decimal scale changed ({old_scale} -> {new_scale}); Iceberg never changes a scale",
            )
        return TypeComparison("promote" if new_precision > old_precision else "narrower")
    if old.name == new.name and old.name in ("array", "map", "struct"):
        nested = _compare_nested(old, new)
        if nested is not None:
            return nested
    if old.name in ("array", "map", "struct") or new.name in ("array", "map", "struct"):
        return TypeComparison(
            "refuse", "a change inside a nested type (struct, array, map) is not applied automatically"
        )
    return TypeComparison("refuse", f"Iceberg only allows {ALLOWED_PROMOTIONS}")


def _compare_nested(old: _Type, new: _Type) -> TypeComparison | None:
    """`narrower` when every part of `new` fits the same part of `old`; None otherwise."""
    if old.name == "struct":
        if [name for name, _ in old.args] != [name for name, _ in new.args]:
            return None
        pairs = [(o, n) for (_, o), (_, n) in zip(old.args, new.args, strict=True)]
    else:
        pairs = list(zip(old.args, new.args, strict=True))
    if all(_compare(o, n).relation in ("same", "narrower") for o, n in pairs):
        return TypeComparison("narrower")
    return None
