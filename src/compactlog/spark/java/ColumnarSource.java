package compactlog.spark;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonBatch;
import org.apache.spark.sql.execution.datasources.v2.python.PythonCustomMetric$;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition;
import org.apache.spark.sql.execution.datasources.v2.python.PythonPartitionReaderFactory;
import org.apache.spark.sql.execution.datasources.v2.python.PythonScan;
import org.apache.spark.sql.execution.datasources.v2.python.PythonStreamingInputPartition;
import org.apache.spark.sql.execution.datasources.v2.python.PythonStreamingPartitionReaderFactory;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.python.ArrowPythonRunner;
import org.apache.spark.sql.execution.python.MapInBatchEvaluatorFactory;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataType$;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The JVM's side of the {@code compactlog} format: Spark's own Python data source, handed to Spark as
 * columns and pruned to the columns a query uses.
 *
 * <p>Everything about what a reader sees stays in the Python source (it plans the ranges and decodes
 * the records in its Python workers, as before). Spark 4's interface for a Python source copies every
 * column of every Arrow batch the worker yields into a row, and asks the source for all of its columns
 * whatever the query uses: for a read of the Kafka source's seven columns that copy cost more than
 * the decoding. This provider, found by Spark under the same name and preferred to the Python one,
 * asks the Python source for the columns the query needs (its reader is given that schema, as with a
 * caller's {@code .schema(...)}) and hands Spark the worker's Arrow vectors as they arrive, as Spark's
 * columnar file sources do. Writes, schemas and options are the Python source's, untouched.
 *
 * <p>It is built against the Spark it runs in (the Python side compiles it on first use, with that
 * Spark's jars), because the parts of Spark it reuses are internal; where it cannot be built, the
 * Python source serves the same format alone.
 */
public final class ColumnarSource implements TableProvider, DataSourceRegister {
  /** The name of the Python source this one serves, under which Spark's data source manager holds it. */
  static final String NAME = "compactlog";

  private PythonDataSourceV2 python;

  static PythonDataSourceV2 pythonSource() {
    PythonDataSourceV2 source = new PythonDataSourceV2();
    source.setShortName(NAME);
    return source;
  }

  private PythonDataSourceV2 python() {
    if (python == null) {
      python = pythonSource();
    }
    return python;
  }

  @Override
  public String shortName() {
    return NAME;
  }

  /** The source's own schema, when Spark asked for it (no schema was given to the reader). */
  private StructType inferred;

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    inferred = python().inferSchema(options);
    return inferred;
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    // A schema the caller gave is read whole: the Python source checks every column it names (and
    // names the one it cannot give), which it could not do for a column pruned away before it looks.
    boolean prunable = schema.equals(inferred);
    return new ColumnarTable((PythonTable) python().getTable(schema, partitioning, properties), schema,
        prunable);
  }

  /** The Python source's table, whose scans are pruned and columnar. */
  static final class ColumnarTable implements Table, SupportsRead, SupportsWrite {
    private final PythonTable table;
    private final StructType schema;
    private final boolean prunable;

    ColumnarTable(PythonTable table, StructType schema, boolean prunable) {
      this.table = table;
      this.schema = schema;
      this.prunable = prunable;
    }

    @Override
    public String name() {
      return table.name();
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return table.capabilities();
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
      return ProducingWrite.builder(table, info);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return new PrunedScanBuilder(schema, options, prunable);
    }
  }

  /** Keeps the columns Spark says the query reads (every column of a schema the caller gave). */
  static final class PrunedScanBuilder implements ScanBuilder, SupportsPushDownRequiredColumns {
    private StructType schema;
    private final CaseInsensitiveStringMap options;
    private final boolean prunable;

    PrunedScanBuilder(StructType schema, CaseInsensitiveStringMap options, boolean prunable) {
      this.schema = schema;
      this.options = options;
      this.prunable = prunable;
    }

    @Override
    public void pruneColumns(StructType required) {
      if (!prunable) {
        return;
      }
      // A query that reads no column (a count) still needs each row once: the offset is the cheapest.
      StructField[] wanted = required.fields().length > 0
          ? required.fields()
          : new StructField[] {schema.fields()[schema.fieldIndex("offset")]};
      // Whole columns: Spark may ask for part of one (a field of the headers' structs), which the
      // source does not give; it then takes the part it reads from the whole column.
      StructField[] whole = new StructField[wanted.length];
      for (int i = 0; i < wanted.length; i++) {
        whole[i] = schema.fields()[schema.fieldIndex(wanted[i].name())];
      }
      schema = new StructType(whole);
    }

    @Override
    public Scan build() {
      return new ColumnarScan(schema, options);
    }
  }

  /**
   * A scan of the Python source with the pruned schema. Each scan asks Python for its own reader (a
   * fresh handle on the Python source: Spark's keeps the first reader it made, for the first schema).
   */
  static final class ColumnarScan implements Scan, Batch {
    private final StructType schema;
    private final CaseInsensitiveStringMap options;
    private PythonBatch batch;

    ColumnarScan(StructType schema, CaseInsensitiveStringMap options) {
      this.schema = schema;
      this.options = options;
    }

    @Override
    public StructType readSchema() {
      return schema;
    }

    @Override
    public String description() {
      return NAME + " (columnar)";
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
      return pythonSource().source().createPythonMetrics();  // those Spark's own scan shows
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    private PythonBatch batch() {
      if (batch == null) {
        batch = new PythonBatch(pythonSource(), NAME, schema, options);
      }
      return batch;
    }

    @Override
    public InputPartition[] planInputPartitions() {
      return batch().planInputPartitions();
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      PythonPartitionReaderFactory f = (PythonPartitionReaderFactory) batch().createReaderFactory();
      return new ColumnarReaderFactory(PythonRead.of(f), f);
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      MicroBatchStream stream = new PythonScan(pythonSource(), NAME, schema, options, new Filter[0])
          .toMicroBatchStream(checkpointLocation);
      return ColumnarStream.wrap(stream);
    }
  }

  /**
   * The Python stream, whatever interfaces Spark chose for it (admission control, availableNow), with
   * its micro-batches' partitions read as columns. A proxy keeps every interface the stream has.
   */
  static final class ColumnarStream implements InvocationHandler {
    private final MicroBatchStream stream;

    private ColumnarStream(MicroBatchStream stream) {
      this.stream = stream;
    }

    static MicroBatchStream wrap(MicroBatchStream stream) {
      Set<Class<?>> interfaces = new LinkedHashSet<>();
      for (Class<?> c = stream.getClass(); c != null; c = c.getSuperclass()) {
        collect(c, interfaces);
      }
      return (MicroBatchStream) Proxy.newProxyInstance(ColumnarSource.class.getClassLoader(),
          interfaces.toArray(new Class<?>[0]), new ColumnarStream(stream));
    }

    private static void collect(Class<?> c, Set<Class<?>> into) {
      for (Class<?> i : c.getInterfaces()) {
        if (into.add(i)) {
          collect(i, into);
        }
      }
    }

    @Override
    public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
      // The proxy is itself: Spark compares plans (to reuse an exchange, to find a plan it has seen).
      if (method.getName().equals("equals") && args != null && args.length == 1
          && method.getParameterTypes()[0] == Object.class) {
        return proxy == args[0];
      }
      if (method.getName().equals("hashCode") && (args == null || args.length == 0)) {
        return System.identityHashCode(proxy);
      }
      Object result;
      try {
        result = method.invoke(stream, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
      if (method.getName().equals("createReaderFactory")
          && result instanceof PythonStreamingPartitionReaderFactory) {
        PythonStreamingPartitionReaderFactory f = (PythonStreamingPartitionReaderFactory) result;
        return new ColumnarReaderFactory(PythonRead.of(f), f);
      }
      if (method.getName().equals("toString")) {
        return "columnar " + result;
      }
      return result;
    }
  }

  /** What a task needs to run the Python source's read function: Spark's own description of it. */
  static final class PythonRead implements java.io.Serializable {
    final UserDefinedPythonDataSource source;
    final byte[] readFunction;
    final StructType schema;
    final scala.Option<String> jobArtifactUUID;
    final scala.Option<String> sessionUUID;

    private PythonRead(UserDefinedPythonDataSource source, byte[] readFunction, StructType schema,
        scala.Option<String> jobArtifactUUID, scala.Option<String> sessionUUID) {
      this.source = source;
      this.readFunction = readFunction;
      this.schema = schema;
      this.jobArtifactUUID = jobArtifactUUID;
      this.sessionUUID = sessionUUID;
    }

    /** A batch read's, from the factory Spark made for it (its fields are public in the bytecode). */
    static PythonRead of(PythonPartitionReaderFactory f) {
      return new PythonRead(
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$source,
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$pickledReadFunc,
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$outputSchema,
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$jobArtifactUUID,
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonPartitionReaderFactory$$sessionUUID);
    }

    /** A micro-batch's, likewise. */
    static PythonRead of(PythonStreamingPartitionReaderFactory f) {
      return new PythonRead(
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonStreamingPartitionReaderFactory$$source,
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonStreamingPartitionReaderFactory$$pickledReadFunc,
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonStreamingPartitionReaderFactory$$outputSchema,
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonStreamingPartitionReaderFactory$$jobArtifactUUID,
          f.org$apache$spark$sql$execution$datasources$v2$python$PythonStreamingPartitionReaderFactory$$sessionUUID);
    }
  }

  /**
   * Reads a partition the Python source planned as Arrow columns. A streaming partition whose rows
   * Spark cached on the driver (which this source's stream reader never asks for) is read as rows.
   */
  static final class ColumnarReaderFactory implements PartitionReaderFactory {
    private final PythonRead read;
    private final PartitionReaderFactory rows;

    ColumnarReaderFactory(PythonRead read, PartitionReaderFactory rows) {
      this.read = read;
      this.rows = rows;
    }

    private static byte[] pickled(InputPartition partition) {
      if (partition instanceof PythonInputPartition) {
        return ((PythonInputPartition) partition).pickedPartition();
      }
      if (partition instanceof PythonStreamingInputPartition
          && ((PythonStreamingInputPartition) partition).blockId().isEmpty()) {
        return ((PythonStreamingInputPartition) partition).pickedPartition();
      }
      return null;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return pickled(partition) != null;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      return rows.createReader(partition);
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      MapInBatchEvaluatorFactory f = read.source.createMapInBatchEvaluatorFactory(read.readFunction,
          "read_from_data_source", UserDefinedPythonDataSource.readInputSchema(), read.schema,
          PythonCustomMetric$.MODULE$.pythonMetrics(), read.jobArtifactUUID, read.sessionUUID);
      // The same runner Spark's Python source uses, fed the same single row (the pickled partition);
      // only what is done with its output differs.
      ArrowPythonRunner runner = PythonTasks.runner(f);
      InternalRow row = new GenericInternalRow(new Object[] {
          new GenericInternalRow(new Object[] {pickled(partition)})});
      TaskContext context = TaskContext.get();
      scala.collection.Iterator<ColumnarBatch> batches = runner.compute(
          scala.collection.Iterator$.MODULE$.single(scala.collection.Iterator$.MODULE$.single(row)),
          context.partitionId(), context);
      return new ColumnarReader(batches, read.schema, read.source, f.pythonMetrics());
    }
  }

  /** Each batch the worker sent, its struct's children as the batch's columns. */
  static final class ColumnarReader implements PartitionReader<ColumnarBatch> {
    private final scala.collection.Iterator<ColumnarBatch> batches;
    private final StructType schema;
    private final UserDefinedPythonDataSource source;
    private final scala.collection.immutable.Map<String, SQLMetric> metrics;
    private ColumnarBatch current;

    ColumnarReader(scala.collection.Iterator<ColumnarBatch> batches, StructType schema,
        UserDefinedPythonDataSource source, scala.collection.immutable.Map<String, SQLMetric> metrics) {
      this.batches = batches;
      this.schema = schema;
      this.source = source;
      this.metrics = metrics;
    }

    @Override
    public boolean next() {
      if (!batches.hasNext()) {
        return false;
      }
      ColumnarBatch batch = batches.next();
      ArrowColumnVector struct = (ArrowColumnVector) batch.column(0);
      // Columns of other names, types or number would be read through the wrong accessors: refuse
      // them, named, whatever Spark's own check is set to.
      if (!DataType$.MODULE$.equalsIgnoreNullability(struct.dataType(), schema)) {
        throw new IllegalStateException("the compactlog source's Python reader sent "
            + struct.dataType().simpleString() + " where " + schema.simpleString() + " was asked for");
      }
      ColumnVector[] columns = new ColumnVector[schema.fields().length];
      for (int i = 0; i < columns.length; i++) {
        columns[i] = new Lent(struct.getChild(i));
      }
      current = new ColumnarBatch(columns, batch.numRows());
      return true;
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
      return PythonTasks.metrics(source, metrics);
    }

    @Override
    public ColumnarBatch get() {
      return current;
    }

    @Override
    public void close() {
      // The runner's worker and buffers are released when the task completes, as for Spark's own reader.
    }
  }
}
