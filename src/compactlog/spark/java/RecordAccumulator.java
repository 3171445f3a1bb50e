package compactlog.spark;

import java.util.HashMap;
import java.util.Map;
import java.util.Random;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A task's producer: routes each row of the DataFrame to its partition and gathers each partition's
 * records into batches, as a Java client's record accumulator does, following the plan the Python
 * side wrote (the same producer plan its own writer follows, {@code compactlog.producer}).
 *
 * <p>A keyed record goes to {@code murmur2(key) % partitions}; a keyless one to a sticky partition
 * (KIP-794), chosen at random and kept until at least {@code batch.size} bytes went to it, switching
 * where a batch starts; a row's {@code partition} column wins over both. A partition's batch is
 * closed when the next record would take it past the plan's target ({@code batch.size} within the
 * log's limit; a record larger than that goes alone), a compressed batch by its estimated compressed
 * size as in Kafka's producer (the topic's ratio so far, learnt batch by batch, with its 5% margin);
 * one that compresses to more than the limit all the same is split in halves, as Kafka's producer
 * splits a batch the broker refused. Open batches are flushed
 * whenever they hold more than the producer's {@code buffer.memory} together, so a task's memory does
 * not grow with its rows. Within a partition, rows keep the DataFrame's order.
 */
final class RecordAccumulator {
  static final int NO_TOPIC = 1;
  static final int UNKNOWN_TOPIC = 2;
  static final int NO_PARTITION = 3;
  static final int NULL_HEADER_KEY = 4;
  static final long BUFFER_MEMORY = 32L << 20;  // the Java producer's buffer.memory
  // Kafka's producer's steps for its compression ratio estimate, and the margin it adds to it.
  private static final float RATIO_BETTER_STEP = 0.005f;
  private static final float RATIO_WORSE_STEP = 0.05f;
  private static final float ESTIMATION_MARGIN = 1.05f;

  /** Where batches and unroutable rows go (to the Python task, which validates and stages them). */
  interface Sink {
    void batch(UTF8String topic, int partition, byte[] batch, long now);

    void problem(UTF8String topic, long partition, int code);
  }

  /** One topic's open batches and sticky partition. */
  private static final class TopicState {
    final TopicPlan plan;
    final UTF8String name;
    final BatchBuilder[] open;
    int sticky = -1;
    long produced;  // bytes that went to the sticky partition since it was chosen
    // Compressed over plain bytes, as the batches closed so far suggest: a compressed batch is filled
    // by its estimated compressed size, as Kafka's producer fills one (CompressionRatioEstimator).
    float ratio = 1.0f;

    TopicState(TopicPlan plan) {
      this.plan = plan;
      this.name = UTF8String.fromString(plan.topic);
      this.open = new BatchBuilder[plan.partitions];
    }

    BatchBuilder builder(int p) {
      if (open[p] == null) {
        open[p] = new BatchBuilder();
      }
      return open[p];
    }

    /**
     * Whether a record of {@code fieldBytes} at {@code ts} joins partition p's open batch: whether the
     * batch's estimated size with it stays within the target, counting the new record uncompressed.
     */
    boolean joins(int p, long ts, int fieldBytes) {
      BatchBuilder b = open[p];
      int room = plan.target - BatchBuilder.HEADER;
      if (b == null || b.count() == 0 || room <= 0) {
        return false;
      }
      long records = b.bytes() - BatchBuilder.HEADER;
      int next = b.sizeOf(ts, fieldBytes);
      if (records + next > plan.plainLimit) {
        return false;  // however well it compresses, the log refuses a batch that inflates beyond this
      }
      long estimate = plan.codec == 0 ? records : (long) (records * ratio * ESTIMATION_MARGIN);
      return estimate + next <= room;
    }

    /** Learns from a closed batch how well this topic's records compress, as Kafka's estimator does. */
    void observe(int plain, int compressed) {
      float observed = (float) compressed / plain;
      if (observed > ratio) {
        ratio = Math.max(ratio + RATIO_WORSE_STEP, observed);
      } else if (observed < ratio) {
        ratio = Math.max(ratio - RATIO_BETTER_STEP, observed);  // never below what was seen, nor 0
      }
    }
  }

  private final Map<String, TopicPlan> plans;
  private final RecordColumns columns;
  private final String fixedTopic;
  private final Sink sink;
  private final Map<String, TopicState> topics = new HashMap<>();
  private final BatchBuilder.Codecs codecs = new BatchBuilder.Codecs();
  private final Random random = new Random();
  private final RecordColumns.Field key = new RecordColumns.Field();
  private final RecordColumns.Field value = new RecordColumns.Field();
  private RecordColumns.Field[] headerKeys = new RecordColumns.Field[0];
  private RecordColumns.Field[] headerValues = new RecordColumns.Field[0];
  private UTF8String lastName;  // the topic column's last value, and its state
  private TopicState last;
  private long open;  // bytes in open batches
  private long retained;  // the capacity of every builder's arrays, open or not

  RecordAccumulator(Map<String, TopicPlan> plans, RecordColumns columns, String fixedTopic, Sink sink) {
    this.plans = plans;
    this.columns = columns;
    this.fixedTopic = fixedTopic;
    this.sink = sink;
  }

  private TopicState state(String topic) {
    TopicState t = topics.get(topic);
    if (t == null && plans.containsKey(topic)) {
      t = new TopicState(plans.get(topic));
      topics.put(topic, t);
    }
    return t;
  }

  /** Adds a row; false when it could not be routed (the sink was told why, and the task will fail). */
  boolean append(InternalRow row) {
    TopicState t;
    if (fixedTopic != null) {
      t = state(fixedTopic);
      if (t == null) {
        sink.problem(UTF8String.fromString(fixedTopic), -1, UNKNOWN_TOPIC);
        return false;
      }
    } else {
      if (columns.topic < 0 || row.isNullAt(columns.topic)) {
        sink.problem(null, -1, NO_TOPIC);
        return false;
      }
      UTF8String name = row.getUTF8String(columns.topic);
      if (!name.equals(lastName)) {
        lastName = name.clone();  // the row's buffer is reused for the next row
        last = state(name.toString());
      }
      t = last;
      if (t == null) {
        sink.problem(lastName, -1, UNKNOWN_TOPIC);
        return false;
      }
    }
    key.read(row, columns.key, columns.keyKind);
    value.read(row, columns.value, columns.valueKind);
    int fieldBytes = key.encodedSize() + value.encodedSize();
    int pairs = 0;
    if (columns.headers >= 0 && !row.isNullAt(columns.headers)) {
      ArrayData list = row.getArray(columns.headers);
      pairs = list.numElements();
      if (pairs > headerKeys.length) {
        growHeaders(pairs);
      }
      for (int j = 0; j < pairs; j++) {
        if (list.isNullAt(j)) {
          sink.problem(t.name, -1, NULL_HEADER_KEY);
          return false;
        }
        InternalRow pair = list.getStruct(j, 2);
        headerKeys[j].read(pair, 0, columns.headerKeyKind);
        headerValues[j].read(pair, 1, columns.headerValueKind);
        if (headerKeys[j].length < 0) {
          sink.problem(t.name, -1, NULL_HEADER_KEY);
          return false;
        }
        fieldBytes += headerKeys[j].encodedSize() + headerValues[j].encodedSize();
      }
    }
    fieldBytes += BatchBuilder.varintSize(pairs);
    // A row without a timestamp is stamped when it is added, as Kafka's producer stamps a record at send().
    long ts = columns.timestamp < 0 || row.isNullAt(columns.timestamp)
        ? System.currentTimeMillis() : Math.floorDiv(row.getLong(columns.timestamp), 1000L);
    int p;
    if (columns.partition >= 0 && !row.isNullAt(columns.partition)) {
      long given = partitionOf(row);
      if (given < 0 || given >= t.plan.partitions) {
        sink.problem(t.name, given, NO_PARTITION);
        return false;
      }
      p = (int) given;
    } else if (key.length >= 0) {
      p = (key.murmur2() & 0x7fffffff) % t.plan.partitions;
    } else {
      p = sticky(t, ts, fieldBytes);
    }
    add(t, p, ts, fieldBytes, pairs, key.length < 0 && (columns.partition < 0 || row.isNullAt(columns.partition)));
    return true;
  }

  private long partitionOf(InternalRow row) {
    switch (columns.partitionWidth) {
      case 8:
        return row.getLong(columns.partition);
      case 2:
        return row.getShort(columns.partition);
      case 1:
        return row.getByte(columns.partition);
      default:
        return row.getInt(columns.partition);
    }
  }

  private void growHeaders(int n) {
    RecordColumns.Field[] keys = new RecordColumns.Field[n];
    RecordColumns.Field[] values = new RecordColumns.Field[n];
    for (int j = 0; j < n; j++) {
      keys[j] = j < headerKeys.length ? headerKeys[j] : new RecordColumns.Field();
      values[j] = j < headerValues.length ? headerValues[j] : new RecordColumns.Field();
    }
    headerKeys = keys;
    headerValues = values;
  }

  /** The sticky partition for a keyless record, switched where a batch would start once enough went to it. */
  private int sticky(TopicState t, long ts, int fieldBytes) {
    if (t.sticky < 0 || (t.produced >= Math.max(1, t.plan.batchBytes) && !t.joins(t.sticky, ts, fieldBytes))) {
      t.sticky = random.nextInt(t.plan.partitions);
      t.produced = 0;
    }
    return t.sticky;
  }

  private void add(TopicState t, int p, long ts, int fieldBytes, int pairs, boolean keyless) {
    BatchBuilder b = t.builder(p);
    if (b.count() > 0 && !t.joins(p, ts, fieldBytes)) {
      close(t, p);
    }
    if (b.count() == 0) {
      open += BatchBuilder.HEADER;
      if (keyless) {
        t.produced += BatchBuilder.HEADER;
      }
    }
    int before = b.bytes();
    long capacity = b.capacity();
    b.begin(ts, fieldBytes);
    key.write(b);
    value.write(b);
    b.putVarint(pairs);
    for (int j = 0; j < pairs; j++) {
      headerKeys[j].write(b);
      headerValues[j].write(b);
    }
    b.end();
    int grew = b.bytes() - before;
    open += grew;
    retained += b.capacity() - capacity;
    if (keyless) {
      t.produced += grew;
    }
    if (t.plan.target - BatchBuilder.HEADER <= 0) {
      close(t, p);  // batch.size 0 (or below a header): a record a batch
    }
    if (open > BUFFER_MEMORY) {
      flush();
    }
  }

  /** Closes every open batch: at the end of the task, or when they hold too much memory. */
  void flush() {
    for (TopicState t : topics.values()) {
      for (int p = 0; p < t.open.length; p++) {
        if (t.open[p] != null && t.open[p].count() > 0) {
          close(t, p);
        }
      }
    }
  }

  private void close(TopicState t, int p) {
    BatchBuilder b = t.open[p];
    open -= b.bytes();
    byte[] data = b.build(t.plan.codec, t.plan.level, codecs);
    if (t.plan.codec != 0) {
      t.observe(b.bytes() - BatchBuilder.HEADER, data.length - BatchBuilder.HEADER);
    }
    emit(t, p, b, data);
    b.reset();
    if (retained > BUFFER_MEMORY) {
      // Idle buffers beyond the producer's memory are given back: many partitions, each of which once
      // filled a large batch, would otherwise hold a batch.size each.
      retained -= b.capacity();
      b.release();
      retained += b.capacity();
    }
  }

  /** Hands on a built batch; one larger than the log takes is split in halves and each built again. */
  private void emit(TopicState t, int p, BatchBuilder b, byte[] data) {
    if (data.length > t.plan.limit && b.count() > 1) {
      // As Kafka's producer splits a batch the broker refused. A single record that is too large goes
      // as it is, and its validation names the log's limit.
      int mid = b.count() / 2;
      BatchBuilder first = b.slice(0, mid);
      BatchBuilder second = b.slice(mid, b.count());
      emit(t, p, first, first.build(t.plan.codec, t.plan.level, codecs));
      emit(t, p, second, second.build(t.plan.codec, t.plan.level, codecs));
      return;
    }
    sink.batch(t.name, p, data, System.currentTimeMillis());
  }
}
