package compactlog.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;

import org.apache.spark.ContextAwareIterator;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.execution.datasources.v2.python.PythonBatchWrite;
import org.apache.spark.sql.execution.datasources.v2.python.PythonBatchWriterFactory;
import org.apache.spark.sql.execution.datasources.v2.python.PythonCustomMetric$;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.execution.datasources.v2.python.PythonWriterCommitMessage;
import org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code df.write.format("compactlog")} with the JVM as the job's producer.
 *
 * <p>Spark hands a Python sink every row as Arrow, a copy of each column, which costs more CPU than
 * Parquet's whole write. Here each task routes its rows and builds Kafka batches in its own thread
 * ({@link RecordAccumulator}) and hands the Python source's writer whole batches, one row each; the
 * Python side validates every batch with the append's rules, stages it, and commits the job as it
 * does its own writes ({@code compactlog.spark.produced}). The plan the batches are built by (codec,
 * level, batch size, limits, partitions) is the Python side's, asked for when the job starts.
 *
 * <p>A DataFrame with a column type only the Python writer takes (or refuses by name), an overwrite,
 * and streams are left to the Python source as they were.
 */
final class ProducingWrite {
  private ProducingWrite() {}

  static final String PLAN_OPTION = "compactlog.produced.plan";  // compactlog.spark.produced's
  static final StructType BATCHES =
      StructType.fromDDL("topic string, partition long, problem int, batch binary, now long");
  private static final long GROUP_BYTES = 8L << 20;  // the batches of one Arrow batch to the worker
  private static final int GROUP_ROWS = 4096;

  static WriteBuilder builder(PythonTable table, LogicalWriteInfo info) {
    WriteBuilder python = table.newWriteBuilder(info);
    RecordColumns columns = RecordColumns.of(info.schema());
    return columns == null ? python : new Builder(python, info, columns);
  }

  /** What the job writes (the user's schema and options) and how its rows are read. */
  private static final class Builder implements WriteBuilder, SupportsTruncate {
    private final WriteBuilder python;
    private final LogicalWriteInfo info;
    private final RecordColumns columns;

    Builder(WriteBuilder python, LogicalWriteInfo info, RecordColumns columns) {
      this.python = python;
      this.info = info;
      this.columns = columns;
    }

    @Override
    public WriteBuilder truncate() {
      return ((SupportsTruncate) python).truncate();  // the Python writer refuses it, by name
    }

    @Override
    public Write build() {
      return new ProducedWrite(this, python.build());
    }
  }

  /** A batch write through the JVM's producer; a stream's is the Python source's own. */
  private static final class ProducedWrite implements Write {
    private final Builder job;
    private final Write python;

    ProducedWrite(Builder job, Write python) {
      this.job = job;
      this.python = python;
    }

    @Override
    public String description() {
      return ColumnarSource.NAME + " (batches built in the JVM)";
    }

    @Override
    public BatchWrite toBatch() {
      return new ProducedBatchWrite(job.info, job.columns);
    }

    @Override
    public StreamingWrite toStreaming() {
      return python.toStreaming();
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
      return python.supportedCustomMetrics();
    }

    @Override
    public CustomTaskMetric[] reportDriverMetrics() {
      return python.reportDriverMetrics();
    }
  }

  /** The write Spark's Python source makes, given the batches' schema; its commit is the job's. */
  private static final class ProducedBatchWrite implements BatchWrite {
    private final LogicalWriteInfo info;
    private final RecordColumns columns;
    private PythonBatchWrite python;

    ProducedBatchWrite(LogicalWriteInfo info, RecordColumns columns) {
      this.info = info;
      this.columns = columns;
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo physical) {
      Path plan = io(() -> Files.createTempFile("compactlog-plan-", ".tsv"));
      try {
        Map<String, String> options = new HashMap<>(info.options().asCaseSensitiveMap());
        options.keySet().removeIf(k -> k.equalsIgnoreCase(PLAN_OPTION));  // the plan goes where this side reads it
        options.put(PLAN_OPTION, plan.toString());
        python = new PythonBatchWrite(ColumnarSource.pythonSource(), ColumnarSource.NAME,
            new BatchesInfo(info.queryId(), new CaseInsensitiveStringMap(options)), false);
        // The Python writer is made on the driver here: it checks the options, starts the job's
        // staging and writes the plan.
        PythonBatchWriterFactory f = (PythonBatchWriterFactory) python.createBatchWriterFactory(physical);
        try {
          return new Factory(f.source(), f.pickledWriteFunc(), f.jobArtifactUUID(), f.sessionUUID(),
              TopicPlan.parse(io(() -> Files.readString(plan, StandardCharsets.UTF_8))), columns,
              info.options().get("topic"));
        } catch (RuntimeException e) {
          python.abort(new WriterCommitMessage[0]);  // Spark aborts no job whose factory it never got
          throw e;
        }
      } finally {
        plan.toFile().delete();  // (a temporary file: if it stays, the machine's cleaner takes it)
      }
    }

    @Override
    public boolean useCommitCoordinator() {
      return python == null || python.useCommitCoordinator();
    }

    @Override
    public void onDataWriterCommit(WriterCommitMessage message) {
      python.onDataWriterCommit(message);
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
      python.commit(messages);
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
      if (python != null) {
        python.abort(messages);
      }
    }
  }

  private interface IO<T> {
    T get() throws IOException;
  }

  private static <T> T io(IO<T> call) {
    try {
      return call.get();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static final class BatchesInfo implements LogicalWriteInfo {
    private final String queryId;
    private final CaseInsensitiveStringMap options;

    BatchesInfo(String queryId, CaseInsensitiveStringMap options) {
      this.queryId = queryId;
      this.options = options;
    }

    @Override
    public CaseInsensitiveStringMap options() {
      return options;
    }

    @Override
    public String queryId() {
      return queryId;
    }

    @Override
    public StructType schema() {
      return BATCHES;
    }
  }

  private static final class Factory implements DataWriterFactory {
    private final UserDefinedPythonDataSource source;
    private final byte[] writeFunction;
    private final scala.Option<String> jobArtifactUUID;
    private final scala.Option<String> sessionUUID;
    private final HashMap<String, TopicPlan> plans;
    private final RecordColumns columns;
    private final String topic;

    Factory(UserDefinedPythonDataSource source, byte[] writeFunction, scala.Option<String> jobArtifactUUID,
        scala.Option<String> sessionUUID, HashMap<String, TopicPlan> plans,
        RecordColumns columns, String topic) {
      this.source = source;
      this.writeFunction = writeFunction;
      this.jobArtifactUUID = jobArtifactUUID;
      this.sessionUUID = sessionUUID;
      this.plans = plans;
      this.columns = columns;
      this.topic = topic;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      return new Producer(this);
    }
  }

  /** One task: its rows become batches here, and the Python writer validates and stages them. */
  private static final class Producer implements DataWriter<InternalRow> {
    private final Factory job;
    private final scala.collection.immutable.Map<String, SQLMetric> metrics =
        PythonCustomMetric$.MODULE$.pythonMetrics();
    private WriterCommitMessage message;

    Producer(Factory job) {
      this.job = job;
    }

    @Override
    public void writeAll(java.util.Iterator<InternalRow> records) {
      TaskContext context = TaskContext.get();
      // Rows stop being taken once the task is done, as Spark's own Python runners take their input.
      Batches batches = new Batches(CollectionConverters.asJava(
          new ContextAwareIterator<>(context, CollectionConverters.asScala(records))));
      batches.accumulator = new RecordAccumulator(job.plans, job.columns, job.topic, batches);
      scala.collection.Iterator<ColumnarBatch> out = PythonTasks.runner(
          job.source.createMapInBatchEvaluatorFactory(job.writeFunction, "write_to_data_source", BATCHES,
              UserDefinedPythonDataSource.writeOutputSchema(), metrics, job.jobArtifactUUID, job.sessionUUID))
          .compute(batches.groups(), context.partitionId(), context);
      while (out.hasNext()) {
        ColumnarBatch batch = out.next();
        ArrowColumnVector struct = (ArrowColumnVector) batch.column(0);
        for (int i = 0; i < batch.numRows(); i++) {
          if (message != null) {
            throw new IllegalStateException("the compactlog writer's Python task sent more than one commit message");
          }
          message = new PythonWriterCommitMessage(struct.getChild(0).getBinary(i));
        }
      }
      if (message == null) {
        throw new IllegalStateException("the compactlog writer's Python task sent no commit message");
      }
    }

    @Override
    public void write(InternalRow record) {
      throw new UnsupportedOperationException("a compactlog task writes all its rows at once (writeAll)");
    }

    @Override
    public WriterCommitMessage commit() {
      return message;
    }

    @Override
    public void abort() {
      // The Python task removed what it staged when it failed; the job's abort removes the rest.
    }

    @Override
    public void close() {}

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
      return PythonTasks.metrics(job.source, metrics);
    }
  }

  /**
   * The rows sent to the Python task: the accumulator's batches as it closes them, in groups of at
   * most {@link #GROUP_BYTES} (one Arrow batch each), pulled by the runner as it writes to the worker.
   */
  private static final class Batches implements RecordAccumulator.Sink {
    private final java.util.Iterator<InternalRow> rows;
    private final ArrayDeque<InternalRow> ready = new ArrayDeque<>();
    RecordAccumulator accumulator;
    private boolean done;  // every row taken and the last batches closed, or a row that cannot be routed

    Batches(java.util.Iterator<InternalRow> rows) {
      this.rows = rows;
    }

    @Override
    public void batch(UTF8String topic, int partition, byte[] batch, long now) {
      ready.add(wrapped(topic, partition, 0, batch, now));
    }

    @Override
    public void problem(UTF8String topic, long partition, int code) {
      ready.add(wrapped(topic, partition, code, null, 0L));
      done = true;  // the Python task raises the error this row stands for
    }

    private static InternalRow wrapped(UTF8String topic, long partition, int problem, byte[] batch, long now) {
      return new GenericInternalRow(new Object[] {
          new GenericInternalRow(new Object[] {topic, partition, problem, batch, now})});
    }

    /** Whether a row is ready, taking rows from the DataFrame until one is or none are left. */
    private boolean fill() {
      while (ready.isEmpty() && !done) {
        if (rows.hasNext()) {
          if (!accumulator.append(rows.next())) {
            done = true;
          }
        } else {
          accumulator.flush();
          done = true;
        }
      }
      return !ready.isEmpty();
    }

    private long sizeOf(InternalRow row) {
      byte[] batch = row.getStruct(0, 5).getBinary(3);
      return batch == null ? 0 : batch.length;
    }

    scala.collection.Iterator<scala.collection.Iterator<InternalRow>> groups() {
      return new scala.collection.AbstractIterator<scala.collection.Iterator<InternalRow>>() {
        @Override
        public boolean hasNext() {
          return fill();
        }

        @Override
        public scala.collection.Iterator<InternalRow> next() {
          return new scala.collection.AbstractIterator<InternalRow>() {
            private long bytes;
            private int count;

            @Override
            public boolean hasNext() {
              return bytes < GROUP_BYTES && count < GROUP_ROWS && fill();
            }

            @Override
            public InternalRow next() {
              InternalRow row = ready.poll();
              bytes += sizeOf(row);
              count++;
              return row;
            }
          };
        }
      };
    }
  }
}
