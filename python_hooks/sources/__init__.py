"""A new source table from its landing folder (`python -m python_hooks add-source`): the request and
what it finds (`model`), the raw table from its footers (`raw_table`), the yml and SQL written
(`yml`), and the plan checked before any write (`add_source`)."""
