"""The fuzz harness of raw files (issue 29): `damage` breaks a valid DMS or Debezium file the ways storage
and producers do; `corpus` holds the recipes (source file, kind, seed) the Spark tests run.

Imported as `fuzz` (pytest.ini's `pythonpath` puts tests/pytest on the import path)."""
