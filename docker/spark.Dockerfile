# Spark master and worker for the reassignment planner: the official Apache Spark image, same Spark
# version as the pyspark in docker/requirements.txt (driver and executors must match), plus the
# Python the planner's executor code needs.
#
# PySpark refuses executors whose Python minor version differs from the driver's: the driver runs in
# the Airflow image (Python 3.11), the Spark image's python3 is Ubuntu's (3.10 on jammy). So the
# executors get Python 3.11 in /opt/kafka-ops/python with numpy, pyarrow and pandas (pinned as in
# requirements.lock), started by /opt/kafka-ops/python. docker-compose.yaml sets PYSPARK_PYTHON to that
# path in the Airflow containers (the driver tells the executors which Python to start) and
# PYSPARK_DRIVER_PYTHON to the Airflow image's own python.
ARG SPARK_IMAGE=apache/spark:4.3.0-scala2.13-java17-python3-ubuntu
FROM ${SPARK_IMAGE}

USER root
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3.11 python3.11-venv wget \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/kafka-ops/venv \
 && /opt/kafka-ops/venv/bin/pip install --no-cache-dir numpy==2.4.6 pyarrow==26.0.1 pandas==3.1.1 \
 && printf '#!/bin/sh\nexec /opt/kafka-ops/venv/bin/python "$@"\n' > /opt/kafka-ops/python \
 && chmod 0755 /opt/kafka-ops/python \
 && /opt/kafka-ops/python -c "import numpy, pyarrow, pandas, sys; assert sys.version_info[:2] == (3, 11)" \
 && install -d -o spark -g spark /opt/kafka-ops/data
USER spark
