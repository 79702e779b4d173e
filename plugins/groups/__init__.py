"""Task-group factories the operation DAGs are built from: ``broker_roll`` and ``cluster_guard``."""
