"""Thin adapters to real systems (Kafka admin, ZooKeeper, Burrow), Airflow hook style.

Import absolutely (``from hooks.kafka_admin import KafkaAdminHook``). Every hook can be built from
an Airflow connection id or from plain values (for tests and scripts).
"""
