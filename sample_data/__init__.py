"""Sample raw change files, written exactly as AWS DMS and Debezium write them."""
