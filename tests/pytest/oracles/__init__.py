"""The pure-Python replays the tests compare the warehouse with: each computes a table's expected
content, or a batch's expected counts, from the raw change files alone, not from the models' SQL.

Imported as `oracles` (pytest.ini's `pythonpath` puts tests/pytest on the import path)."""
