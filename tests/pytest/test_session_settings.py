"""A running session gets its builder's settings at every statement, as pyspark gives them, in one call
(python_hooks/project/embedded_lock.py: `_apply_settings`): dbt-spark's `session` method builds a builder of
the profile's settings before each statement, and a setting a statement changed is set back by the next."""

from __future__ import annotations

from python_hooks.project import embedded_lock

KEY = "spark.sql.shuffle.partitions"


def _dbt_spark_builder(settings: dict[str, str]):
    """What dbt-spark's session cursor does before each statement."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.enableHiveSupport()
    for name, value in settings.items():
        builder = builder.config(name, value)
    return builder


def test_a_running_session_gets_the_builders_settings_at_every_statement(spark) -> None:
    profile = spark.conf.get(KEY)
    settings = {KEY: profile, "spark.sql.adaptive.enabled": spark.conf.get("spark.sql.adaptive.enabled")}
    try:
        assert _dbt_spark_builder(settings).getOrCreate() is spark
        maps = dict(embedded_lock._SETTINGS_MAPS)
        spark.conf.set(KEY, "7")  # what a statement's `set` does
        assert _dbt_spark_builder(settings).getOrCreate() is spark
        assert spark.conf.get(KEY) == profile, "the next statement sets the profile's value again"
        assert embedded_lock._SETTINGS_MAPS.keys() == maps.keys()
        assert all(embedded_lock._SETTINGS_MAPS[key] is made for key, made in maps.items()), (
            "the same settings: the Java map made before, again"
        )
        other = str(int(profile) + 3)
        _dbt_spark_builder({**settings, KEY: other}).getOrCreate()
        assert spark.conf.get(KEY) == other, "other settings are applied, from a map of their own"
    finally:
        spark.conf.set(KEY, profile)
