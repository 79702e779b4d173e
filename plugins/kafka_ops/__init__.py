"""kafka-ops domain logic: cluster snapshots, health rules, restart plans, cluster profiles.

Pure Python, no Airflow imports; import modules absolutely (``from kafka_ops.health import ...``).
"""
