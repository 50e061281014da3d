"""Dagster resources: the code location's only door into coordinator_lib."""

from resources.coordinator import CoordinatorResource, NoSparkInSensors
from resources.spark import pyspark_resource

__all__ = ["CoordinatorResource", "NoSparkInSensors", "pyspark_resource"]
