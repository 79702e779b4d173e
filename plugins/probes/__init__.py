"""Looks at a real cluster judged by the pure rules of ``kafka_ops.health``: a registry of probe kinds."""
