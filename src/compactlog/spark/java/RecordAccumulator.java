package compactlog.spark;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.NullType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.Platform;
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
 * log's limit; a record larger than that goes alone), and one that compresses to more than the limit
 * is split in halves, as Kafka's producer splits a batch the broker refused. Open batches are flushed
 * whenever they hold more than the producer's {@code buffer.memory} together, so a task's memory does
 * not grow with its rows. Within a partition, rows keep the DataFrame's order.
 */
final class RecordAccumulator {
  static final int NO_TOPIC = 1;
  static final int UNKNOWN_TOPIC = 2;
  static final int NO_PARTITION = 3;
  static final int NULL_HEADER_KEY = 4;
  static final long BUFFER_MEMORY = 32L << 20;  // the Java producer's buffer.memory

  /** Where batches and unroutable rows go (to the Python task, which validates and stages them). */
  interface Sink {
    void batch(UTF8String topic, int partition, byte[] batch, long now);

    void problem(UTF8String topic, int partition, int code);
  }

  /** The Python side's plan for one topic ({@code compactlog.spark.produced.plan_text}). */
  static final class TopicPlan implements Serializable {
    final String topic;
    final int partitions;
    final int codec;
    final int level;
    final int batchBytes;
    final int target;
    final int limit;

    private TopicPlan(String[] f) {
      topic = f[0];
      partitions = Integer.parseInt(f[1]);
      codec = Integer.parseInt(f[2]);
      level = Integer.parseInt(f[3]);
      batchBytes = Integer.parseInt(f[4]);
      target = Integer.parseInt(f[5]);
      limit = Integer.parseInt(f[6]);
    }

    static HashMap<String, TopicPlan> parse(String text) {
      HashMap<String, TopicPlan> plans = new HashMap<>();
      for (String line : text.split("\n")) {
        if (!line.isEmpty()) {
          String[] f = line.split("\t");
          if (f.length != 7) {
            throw new IllegalStateException("compactlog's write plan has a line of " + f.length
                + " fields, not 7: " + line);
          }
          plans.put(f[0], new TopicPlan(f));
        }
      }
      return plans;
    }
  }

  private static final int NONE = 0;
  private static final int BYTES = 1;
  private static final int STRING = 2;

  /**
   * Which columns of the DataFrame are read, and how: those the Python writer reads, by name. Null
   * when a column's type is one only the Python writer handles (or refuses by name).
   */
  static final class Columns implements Serializable {
    int key = -1;
    int keyKind;
    int value = -1;
    int valueKind;
    int timestamp = -1;
    int headers = -1;
    int headerKeyKind;
    int headerValueKind;
    int topic = -1;
    int partition = -1;
    int partitionWidth;  // the partition column's integer type, in bytes

    static Columns of(StructType schema) {
      Columns c = new Columns();
      StructField[] fields = schema.fields();
      for (int i = fields.length - 1; i >= 0; i--) {  // the first of a name wins, as in the Python writer
        DataType t = fields[i].dataType();
        switch (fields[i].name()) {
          case "key":
            c.key = i;
            c.keyKind = bytesKind(t);
            break;
          case "value":
            c.value = i;
            c.valueKind = bytesKind(t);
            break;
          case "timestamp":
            c.timestamp = t instanceof TimestampType || t instanceof TimestampNTZType ? i : -2;
            break;
          case "topic":
            c.topic = t instanceof StringType ? i : -2;
            break;
          case "partition":
            c.partitionWidth = t instanceof IntegerType ? 4 : t instanceof LongType ? 8
                : t instanceof ShortType ? 2 : t instanceof ByteType ? 1 : 0;
            c.partition = c.partitionWidth > 0 ? i : -2;
            break;
          case "headers":
            c.headers = i;
            c.headerKeyKind = -1;
            if (t instanceof ArrayType && ((ArrayType) t).elementType() instanceof StructType) {
              StructField[] pair = ((StructType) ((ArrayType) t).elementType()).fields();
              if (pair.length == 2) {
                c.headerKeyKind = bytesKind(pair[0].dataType());
                c.headerValueKind = bytesKind(pair[1].dataType());
              }
            }
            break;
          default:
        }
      }
      boolean handled = c.value >= 0 && c.keyKind >= 0 && c.valueKind >= 0 && c.timestamp != -2
          && c.topic != -2 && c.partition != -2
          && (c.headers < 0 || (c.headerKeyKind >= 0 && c.headerValueKind >= 0));
      return handled ? c : null;
    }

    private static int bytesKind(DataType t) {
      if (t instanceof BinaryType) {
        return BYTES;
      }
      if (t instanceof StringType) {
        return STRING;
      }
      return t instanceof NullType ? NONE : -1;
    }
  }

  /** A byte field of the current row, where it lies (no copy for a string). Length -1 is null. */
  private static final class Span {
    Object base;
    long offset;
    int length;

    void read(SpecializedGetters row, int ordinal, int kind) {
      if (ordinal < 0 || kind == NONE || row.isNullAt(ordinal)) {
        length = -1;
      } else if (kind == STRING) {
        UTF8String s = row.getUTF8String(ordinal);
        base = s.getBaseObject();
        offset = s.getBaseOffset();
        length = s.numBytes();
      } else {
        byte[] b = row.getBinary(ordinal);
        base = b;
        offset = Platform.BYTE_ARRAY_OFFSET;
        length = b.length;
      }
    }

    /** Its bytes in a record: a varint length, then the bytes. */
    int encodedSize() {
      return BatchBuilder.varintSize(length) + Math.max(length, 0);
    }

    void write(BatchBuilder b) {
      b.putVarint(length);
      if (length > 0) {
        b.putBytes(base, offset, length);
      }
    }

    /** Kafka's murmur2 of the bytes, as its partitioner hashes a key. */
    int murmur2() {
      final int m = 0x5bd1e995;
      int h = 0x9747b28c ^ length;
      int whole = length & ~3;
      for (int i = 0; i < whole; i += 4) {
        int k = (Platform.getByte(base, offset + i) & 0xff)
            | (Platform.getByte(base, offset + i + 1) & 0xff) << 8
            | (Platform.getByte(base, offset + i + 2) & 0xff) << 16
            | (Platform.getByte(base, offset + i + 3) & 0xff) << 24;
        k *= m;
        k ^= k >>> 24;
        k *= m;
        h *= m;
        h ^= k;
      }
      switch (length & 3) {
        case 3:
          h ^= (Platform.getByte(base, offset + whole + 2) & 0xff) << 16;
        // falls through
        case 2:
          h ^= (Platform.getByte(base, offset + whole + 1) & 0xff) << 8;
        // falls through
        case 1:
          h ^= Platform.getByte(base, offset + whole) & 0xff;
          h *= m;
        // falls through
        default:
      }
      h ^= h >>> 13;
      h *= m;
      h ^= h >>> 15;
      return h;
    }
  }

  /** One topic's open batches and sticky partition. */
  private static final class TopicState {
    final TopicPlan plan;
    final UTF8String name;
    final BatchBuilder[] open;
    int sticky = -1;
    long produced;  // bytes that went to the sticky partition since it was chosen

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

    /** Whether a record of {@code fieldBytes} at {@code ts} joins partition p's open batch. */
    boolean joins(int p, long ts, int fieldBytes) {
      BatchBuilder b = open[p];
      int room = plan.target - BatchBuilder.HEADER;
      return b != null && b.count() > 0 && room > 0
          && b.bytes() - BatchBuilder.HEADER + b.sizeOf(ts, fieldBytes) <= room;
    }
  }

  private final Map<String, TopicPlan> plans;
  private final Columns columns;
  private final String fixedTopic;
  private final Sink sink;
  private final Map<String, TopicState> topics = new HashMap<>();
  private final BatchBuilder.Codecs codecs = new BatchBuilder.Codecs();
  private final Random random = new Random();
  private final Span key = new Span();
  private final Span value = new Span();
  private Span[] headerKeys = new Span[0];
  private Span[] headerValues = new Span[0];
  private UTF8String lastName;  // the topic column's last value, and its state
  private TopicState last;
  private long open;  // bytes in open batches
  private long clock = System.currentTimeMillis();  // a null timestamp's value: read as a batch opens

  RecordAccumulator(Map<String, TopicPlan> plans, Columns columns, String fixedTopic, Sink sink) {
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
    long ts = columns.timestamp < 0 || row.isNullAt(columns.timestamp)
        ? clock : Math.floorDiv(row.getLong(columns.timestamp), 1000L);
    int p;
    if (columns.partition >= 0 && !row.isNullAt(columns.partition)) {
      long given = partitionOf(row);
      if (given < 0 || given >= t.plan.partitions) {
        sink.problem(t.name, (int) Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, given)),
            NO_PARTITION);
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
    Span[] keys = new Span[n];
    Span[] values = new Span[n];
    for (int j = 0; j < n; j++) {
      keys[j] = j < headerKeys.length ? headerKeys[j] : new Span();
      values[j] = j < headerValues.length ? headerValues[j] : new Span();
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
      clock = System.currentTimeMillis();
      open += BatchBuilder.HEADER;
      if (keyless) {
        t.produced += BatchBuilder.HEADER;
      }
    }
    int before = b.bytes();
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
    emit(t, p, b);
    b.reset();
  }

  private void emit(TopicState t, int p, BatchBuilder b) {
    byte[] data = b.build(t.plan.codec, t.plan.level, codecs);
    if (data.length > t.plan.limit && b.count() > 1) {
      // Larger than the log takes once compressed: halves, as the producer splits a refused batch. A
      // single record that is too large goes as it is, and its validation names the log's limit.
      int mid = b.count() / 2;
      emit(t, p, b.slice(0, mid));
      emit(t, p, b.slice(mid, b.count()));
      return;
    }
    sink.batch(t.name, p, data, System.currentTimeMillis());
  }
}
