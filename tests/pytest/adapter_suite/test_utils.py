"""dbt-tests-adapter's cross-database macro and data type classes (dbt.tests.adapter.utils), the ones dbt-spark
runs, plus those it skips on its session profile (concat, hash, last_day, replace, right, datediff): with seeds
loading empty cells as null (macros/spark/seed.sql) they are expected to pass here (see
docs/models.md for the last measured counts).

Where dbt-spark adapts a class to Spark SQL, the adaptation is the same here, in this module's own fixtures:
listagg without `order by` (Spark's collect_list has none) and seeds typed where Spark would infer a wider type."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.utils.data_types.test_type_bigint import BaseTypeBigInt
from dbt.tests.adapter.utils.data_types.test_type_boolean import BaseTypeBoolean
from dbt.tests.adapter.utils.data_types.test_type_float import BaseTypeFloat
from dbt.tests.adapter.utils.data_types.test_type_float import seeds__expected_csv as float_expected_csv
from dbt.tests.adapter.utils.data_types.test_type_int import BaseTypeInt
from dbt.tests.adapter.utils.data_types.test_type_int import seeds__expected_csv as int_expected_csv
from dbt.tests.adapter.utils.data_types.test_type_numeric import BaseTypeNumeric
from dbt.tests.adapter.utils.data_types.test_type_string import BaseTypeString
from dbt.tests.adapter.utils.data_types.test_type_timestamp import BaseTypeTimestamp
from dbt.tests.adapter.utils.fixture_listagg import models__test_listagg_yml
from dbt.tests.adapter.utils.test_any_value import BaseAnyValue
from dbt.tests.adapter.utils.test_array_append import BaseArrayAppend
from dbt.tests.adapter.utils.test_array_concat import BaseArrayConcat
from dbt.tests.adapter.utils.test_array_construct import BaseArrayConstruct
from dbt.tests.adapter.utils.test_bool_or import BaseBoolOr
from dbt.tests.adapter.utils.test_cast import BaseCast
from dbt.tests.adapter.utils.test_cast_bool_to_text import BaseCastBoolToText
from dbt.tests.adapter.utils.test_concat import BaseConcat
from dbt.tests.adapter.utils.test_current_timestamp import BaseCurrentTimestampNaive
from dbt.tests.adapter.utils.test_date import BaseDate
from dbt.tests.adapter.utils.test_date_trunc import BaseDateTrunc
from dbt.tests.adapter.utils.test_dateadd import BaseDateAdd
from dbt.tests.adapter.utils.test_datediff import BaseDateDiff
from dbt.tests.adapter.utils.test_equals import BaseEquals
from dbt.tests.adapter.utils.test_escape_single_quotes import BaseEscapeSingleQuotesBackslash
from dbt.tests.adapter.utils.test_except import BaseExcept
from dbt.tests.adapter.utils.test_hash import BaseHash
from dbt.tests.adapter.utils.test_intersect import BaseIntersect
from dbt.tests.adapter.utils.test_last_day import BaseLastDay
from dbt.tests.adapter.utils.test_length import BaseLength
from dbt.tests.adapter.utils.test_listagg import BaseListagg
from dbt.tests.adapter.utils.test_position import BasePosition
from dbt.tests.adapter.utils.test_replace import BaseReplace
from dbt.tests.adapter.utils.test_right import BaseRight
from dbt.tests.adapter.utils.test_safe_cast import BaseSafeCast
from dbt.tests.adapter.utils.test_split_part import BaseSplitPart
from dbt.tests.adapter.utils.test_string_literal import BaseStringLiteral
from dbt.tests.adapter.utils.test_timestamps import BaseCurrentTimestamps

from helpers.adapter_suite import EMPTIED_FOLDERS_KEPT, SUITE_TARGET

# make test leaves this module out for its time (docs/models.md); make test-adapter runs it.
pytestmark = pytest.mark.adapter_suite_full


class TestAnyValue(BaseAnyValue):
    pass


class TestArrayAppend(BaseArrayAppend):
    pass


class TestArrayConcat(BaseArrayConcat):
    pass


class TestArrayConstruct(BaseArrayConstruct):
    pass


class TestBoolOr(BaseBoolOr):
    pass


class TestCast(BaseCast):
    pass


class TestCastBoolToText(BaseCastBoolToText):
    pass


class TestConcat(BaseConcat):
    pass


class TestCurrentTimestamp(BaseCurrentTimestampNaive):
    pass


class TestCurrentTimestamps(BaseCurrentTimestamps):
    # The suite's model casts with `::`, which Spark SQL does not parse: a plain select of the macro instead.
    @pytest.fixture(scope="class")
    def models(self):
        return {"get_current_timestamp.sql": "select {{ current_timestamp() }} as current_timestamp"}

    @pytest.fixture(scope="class")
    def expected_schema(self):
        return {"current_timestamp": "timestamp"}

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return "select current_timestamp() as current_timestamp"


class TestDate(BaseDate):
    pass


class TestDateAdd(BaseDateAdd):
    pass


class TestDateDiff(BaseDateDiff):
    """On the local target its model is a table: as a view, its 37 KB of SQL is more than the embedded Derby metastore
    stores for a view (32,700 characters; create_view_as.sql refuses it in words, test_user_models.py)."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+materialized": "table"}} if SUITE_TARGET == "local" else {}


class TestDateTrunc(BaseDateTrunc):
    pass


class TestEquals(BaseEquals):
    @EMPTIED_FOLDERS_KEPT  # the class's seed, loaded by the suite's first test, is loaded again
    def test_equal_values(self, project):
        super().test_equal_values(project)


class TestEscapeSingleQuotes(BaseEscapeSingleQuotesBackslash):
    pass


class TestExcept(BaseExcept):
    pass


class TestHash(BaseHash):
    pass


class TestIntersect(BaseIntersect):
    pass


class TestLastDay(BaseLastDay):
    pass


class TestLength(BaseLength):
    pass


# Spark's listagg (collect_list + array_join) cannot order: the cases that need an order are left out.
LISTAGG_UNORDERED_SQL = """
with data as (select * from {{ ref('data_listagg') }}),
data_output as (select * from {{ ref('data_listagg_output') }}),
calculate as (
    select group_col, {{ listagg('string_text', "', '") }} as actual, 'comma_whitespace_unordered' as version
    from data where group_col = 3 group by group_col
    union all
    select group_col, {{ listagg('distinct string_text', "','") }} as actual, 'distinct_comma' as version
    from data where group_col = 3 group by group_col
    union all
    select group_col, {{ listagg('string_text') }} as actual, 'no_params' as version
    from data where group_col = 3 group by group_col
)
select calculate.actual, data_output.expected
from calculate
left join data_output
on calculate.group_col = data_output.group_col and calculate.version = data_output.version
"""


class TestListagg(BaseListagg):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "test_listagg.yml": models__test_listagg_yml,
            "test_listagg.sql": self.interpolate_macro_namespace(LISTAGG_UNORDERED_SQL, "listagg"),
        }


class TestPosition(BasePosition):
    pass


class TestReplace(BaseReplace):
    pass


class TestRight(BaseRight):
    pass


class TestSafeCast(BaseSafeCast):
    pass


class TestSplitPart(BaseSplitPart):
    pass


class TestStringLiteral(BaseStringLiteral):
    pass


class TestTypeBigInt(BaseTypeBigInt):
    pass


def _typed_expected(column: str, type_: str) -> str:
    return f"seeds:\n  - name: expected\n    config:\n      column_types:\n        {column}: {type_}\n"


class TestTypeFloat(BaseTypeFloat):
    # A seed's 1.2345 is a double in Spark: the expected column typed as the macro's type.
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"expected.csv": float_expected_csv, "expected.yml": _typed_expected("float_col", "float")}


class TestTypeInt(BaseTypeInt):
    # A seed's 12345678 is a bigint in Spark: the expected column typed as the macro's type.
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"expected.csv": int_expected_csv, "expected.yml": _typed_expected("int_col", "int")}


class TestTypeNumeric(BaseTypeNumeric):
    def numeric_fixture_type(self):
        return "decimal(28,6)"


class TestTypeString(BaseTypeString):
    pass


class TestTypeTimestamp(BaseTypeTimestamp):
    pass


class TestTypeBoolean(BaseTypeBoolean):
    pass
