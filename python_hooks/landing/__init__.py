"""The landing zone: which raw files a table's folder holds (the one listing rule), in which order,
which are unusable (empty), the name of the folder's listing table in the warehouse, and which
files are waiting (not in the ledger yet)."""
