package compactlog.spark;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.python.ArrowPythonRunner;
import org.apache.spark.sql.execution.python.MapInBatchEvaluatorFactory;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * How this format's tasks run the Python source's functions (read a partition, write a task's rows):
 * in Spark's own Arrow runner, described by the factory Spark's Python source makes for them, so
 * that only what is done with the runner's input and output differs from Spark's own path.
 */
final class PythonTasks {
  private PythonTasks() {}

  /**
   * The runner of {@code f}'s function. Its input is an iterator of groups, one Arrow batch each,
   * of rows holding one struct of {@code f}'s input schema (the worker unwraps it); its output, one
   * struct column of the function's output schema.
   */
  static ArrowPythonRunner runner(MapInBatchEvaluatorFactory f) {
    StructType input = new StructType(new StructField[] {new StructField("struct",
        f.org$apache$spark$sql$execution$python$MapInBatchEvaluatorFactory$$inputSchema, true,
        Metadata.empty())});
    return new ArrowPythonRunner(
        f.org$apache$spark$sql$execution$python$MapInBatchEvaluatorFactory$$chainedFunc,
        f.org$apache$spark$sql$execution$python$MapInBatchEvaluatorFactory$$pythonEvalType,
        new int[][] {{0}}, input,
        f.org$apache$spark$sql$execution$python$MapInBatchEvaluatorFactory$$sessionLocalTimeZone,
        f.org$apache$spark$sql$execution$python$MapInBatchEvaluatorFactory$$largeVarTypes,
        f.org$apache$spark$sql$execution$python$MapInBatchEvaluatorFactory$$pythonRunnerConf,
        f.pythonMetrics(),
        f.org$apache$spark$sql$execution$python$MapInBatchEvaluatorFactory$$jobArtifactUUID,
        f.org$apache$spark$sql$execution$python$MapInBatchEvaluatorFactory$$sessionUUID);
  }

  /** The Python metrics' current values, as Spark's own Python reader and writer report them. */
  static CustomTaskMetric[] metrics(UserDefinedPythonDataSource source,
      scala.collection.immutable.Map<String, SQLMetric> metrics) {
    Map<String, Object> values = new HashMap<>();
    for (Map.Entry<String, SQLMetric> e : CollectionConverters.asJava(metrics).entrySet()) {
      values.put(e.getKey(), e.getValue().value());
    }
    return source.createPythonTaskMetrics(
        scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(values)));
  }
}
