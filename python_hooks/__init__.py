"""Python run before dbt: environment defaults and (later) Iceberg schema evolution."""
