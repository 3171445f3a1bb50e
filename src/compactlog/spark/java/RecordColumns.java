package compactlog.spark;

import java.io.Serializable;
import java.util.HashSet;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
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
 * Which columns of a DataFrame become a record, and how they are read: those the Python writer reads
 * ({@code compactlog.spark.writer}), by the same names. A DataFrame with a type only the Python writer
 * handles, or refuses by name, or with one of these names twice (which Spark's hand-off to Python
 * refuses), gets no columns here and goes to the Python writer whole.
 */
final class RecordColumns implements Serializable {
  static final int NONE = 0;  // a column of nulls' type: always null
  static final int BYTES = 1;
  static final int STRING = 2;

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

  private RecordColumns() {}

  /** The columns of {@code schema}, or null where the Python writer must take the DataFrame. */
  static RecordColumns of(StructType schema) {
    RecordColumns c = new RecordColumns();
    Set<String> seen = new HashSet<>();
    StructField[] fields = schema.fields();
    boolean handled = true;
    for (int i = 0; i < fields.length; i++) {
      DataType t = fields[i].dataType();
      String name = fields[i].name();
      switch (name) {
        case "key":
          c.key = i;
          c.keyKind = bytesKind(t);
          handled &= c.keyKind >= 0;
          break;
        case "value":
          c.value = i;
          c.valueKind = bytesKind(t);
          handled &= c.valueKind >= 0;
          break;
        case "timestamp":
          c.timestamp = i;
          handled &= t instanceof TimestampType || t instanceof TimestampNTZType;
          break;
        case "topic":
          c.topic = i;
          handled &= t instanceof StringType;
          break;
        case "partition":
          c.partition = i;
          c.partitionWidth = t instanceof IntegerType ? 4 : t instanceof LongType ? 8
              : t instanceof ShortType ? 2 : t instanceof ByteType ? 1 : 0;
          handled &= c.partitionWidth > 0;
          break;
        case "headers":
          c.headers = i;
          StructField[] pair = t instanceof ArrayType && ((ArrayType) t).elementType() instanceof StructType
              ? ((StructType) ((ArrayType) t).elementType()).fields() : new StructField[0];
          c.headerKeyKind = pair.length == 2 ? bytesKind(pair[0].dataType()) : -1;
          c.headerValueKind = pair.length == 2 ? bytesKind(pair[1].dataType()) : -1;
          handled &= c.headerKeyKind >= 0 && c.headerValueKind >= 0;
          break;
        default:
          continue;
      }
      handled &= seen.add(name);
    }
    return handled && c.value >= 0 ? c : null;
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

  /** A byte field of the current row, where it lies (no copy for a string). Length -1 is null. */
  static final class Field {
    private Object base;
    private long offset;
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
}
