"""The seam between the Python side and everything else: the environment, dbt's arguments, one
session per command, the warehouse (SQL through the dbt adapter), the manifest's tables and their
producers, the pipeline's own tables, SQL quoting, Iceberg's procedures, kill points, the object
store's settings, storage (the one way to the landing files, on this machine or on S3), and a
private PostgreSQL server (postgres: the cluster's metastore, the live source)."""
