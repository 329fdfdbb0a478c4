"""Schema evolution of the current-state tables, before dbt runs: the raw files' union schema from
their footers (`footers`), column types and how they relate (`types`), the pure plan (`plan`), and
applying it through the warehouse (`apply`)."""
