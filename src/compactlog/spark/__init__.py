"""The data pipeline on Apache Spark: topics as DataFrames (batch and streaming) and jobs over them.

``spark.read.format("compactlog")`` works once compactlog is installed: Spark imports the top-level
module ``pyspark_compactlog`` and registers its ``DefaultSource``.
"""
