"""Reassignment planner: the algorithm behind ``spark/reassignment_plan.py``.

Modules (plain Python + numpy, no Spark needed; the Spark driver program only feeds them):

- ``snapshot``: reading and validating a snapshot directory (``brokers.json``, ``partitions.jsonl``)
  into columnar numpy arrays (:class:`planner.snapshot.Snapshot`).
- ``balance``: the placement algorithm (mandatory moves, per-broker shedding, assignment,
  refinement) producing a :class:`planner.balance.Plan`.
- ``leaders``: preferred-leader balancing by reordering replicas (free: no data moves).
- ``waves``: splitting a plan into ordered waves under byte and per-broker move limits.
- ``output``: the plan files (Kafka's reassignment format), ``summary.json`` and the chart.
"""

from planner.errors import PlanInputError

__all__ = ["PlanInputError"]
