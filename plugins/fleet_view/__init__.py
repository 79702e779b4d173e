"""The cluster view inside Airflow's UI: the fleet of Kafka clusters and each cluster's page (``kafka_fleet_view``
registers it). A library folder (``plugins/.airflowignore``)."""
