package compactlog.spark;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.zip.CRC32C;
import java.util.zip.Deflater;
import java.util.zip.GZIPOutputStream;

import com.github.luben.zstd.Zstd;
import com.github.luben.zstd.ZstdCompressCtx;
import net.jpountz.lz4.LZ4Compressor;
import net.jpountz.lz4.LZ4Factory;
import org.apache.spark.unsafe.Platform;
import org.xerial.snappy.SnappyOutputStream;

/**
 * One partition's open batch in Kafka's v2 record format, as a Java producer's batch builder keeps it:
 * records are encoded as they are added (their deltas are known then), and the batch is compressed
 * and sealed with its header and CRC-32C when it is closed.
 *
 * <p>What the log accepts is not decided here: the Python task validates every batch this builds with
 * the append's own rules before staging it. A batch is a plain producer's: CreateTime, no producer
 * id, offsets from 0 (the log assigns them).
 */
final class BatchBuilder {
  static final int HEADER = 61;  // a v2 batch's header, up to its records
  private static final int ATTRIBUTES_AT = 21;  // the CRC covers the header from here on
  private static final int LZ4_BLOCK = 64 * 1024;
  private static final int LZ4_DEFAULT_LEVEL = 9;  // Kafka's default lz4 level means the fast compressor
  private static final byte[] LZ4_FRAME = {0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, (byte) 0x82};

  private byte[] buf = new byte[1 << 12];  // the records, uncompressed
  private int size;
  private int count;
  private long[] timestamps = new long[64];
  private int[] fields = new int[64];  // where each record's key length starts in buf
  private int[] ends = new int[64];

  int count() {
    return count;
  }

  /** The batch's bytes before compression, header included. */
  int bytes() {
    return HEADER + size;
  }

  /** The bytes a record takes as this batch's next, given its fields' encoded length. */
  int sizeOf(long timestamp, int fieldBytes) {
    int body = bodySize(timestamp, fieldBytes);
    return varintSize(body) + body;
  }

  /** A record's bytes after its length: attributes, timestamp and offset deltas, fields. */
  private int bodySize(long timestamp, int fieldBytes) {
    return 1 + varlongSize(delta(timestamp)) + varintSize(count) + fieldBytes;
  }

  private long delta(long timestamp) {
    return count == 0 ? 0 : timestamp - timestamps[0];
  }

  /** The bytes its arrays hold, full or not: what it keeps between batches. */
  long capacity() {
    return buf.length + 16L * timestamps.length;
  }

  /** Gives its arrays back (it is empty): a partition that filled a large batch once may not again. */
  void release() {
    buf = new byte[1 << 12];
    timestamps = new long[64];
    fields = new int[64];
    ends = new int[64];
  }

  /** Starts a record: its length, attributes and deltas; the caller writes its fields next. */
  void begin(long timestamp, int fieldBytes) {
    long delta = delta(timestamp);
    int body = bodySize(timestamp, fieldBytes);
    ensure(size + varintSize(body) + body);
    if (count == timestamps.length) {
      timestamps = Arrays.copyOf(timestamps, count * 2);
      fields = Arrays.copyOf(fields, count * 2);
      ends = Arrays.copyOf(ends, count * 2);
    }
    size = putVarint(buf, size, body);
    buf[size++] = 0;  // attributes: none are defined for records
    size = putVarlong(buf, size, delta);
    size = putVarint(buf, size, count);
    timestamps[count] = timestamp;
    fields[count] = size;
    ends[count] = size + fieldBytes;
  }

  /** Ends the record begun last (its fields were written with the put methods). */
  void end() {
    if (size != ends[count]) {
      throw new IllegalStateException("a record's fields took " + (size - fields[count]) + " bytes, "
          + (ends[count] - fields[count]) + " were counted");
    }
    count++;
  }

  void putVarint(int v) {
    size = putVarint(buf, size, v);
  }

  /** Copies {@code length} bytes of an object's memory (a byte array, or a Spark string's bytes). */
  void putBytes(Object base, long offset, int length) {
    Platform.copyMemory(base, offset, buf, Platform.BYTE_ARRAY_OFFSET + size, length);
    size += length;
  }

  private void ensure(int bytes) {
    if (bytes > buf.length) {
      buf = Arrays.copyOf(buf, Math.max(bytes, buf.length * 2));
    }
  }

  void reset() {
    size = 0;
    count = 0;
  }

  /** Records [from, to) of this batch as a batch of their own (a batch too large once compressed is split). */
  BatchBuilder slice(int from, int to) {
    BatchBuilder part = new BatchBuilder();
    for (int i = from; i < to; i++) {
      int length = ends[i] - fields[i];
      part.begin(timestamps[i], length);
      part.putBytes(buf, Platform.BYTE_ARRAY_OFFSET + fields[i], length);
      part.end();
    }
    return part;
  }

  /** The sealed batch: header, records compressed with {@code codec} (a Kafka codec id) at {@code level}. */
  byte[] build(int codec, int level, Codecs codecs) {
    byte[] out;
    int body;
    if (codec == 0) {
      out = new byte[HEADER + size];
      System.arraycopy(buf, 0, out, HEADER, size);
      body = size;
    } else {
      out = codecs.compress(codec, level, buf, size, HEADER);
      body = out.length - HEADER;
    }
    long max = Long.MIN_VALUE;
    for (int i = 0; i < count; i++) {
      max = Math.max(max, timestamps[i]);
    }
    putLong(out, 0, 0L);  // base offset: the log assigns it
    putInt(out, 8, HEADER - 12 + body);  // batch length, after the offset and itself
    putInt(out, 12, -1);  // partition leader epoch
    out[16] = 2;  // magic
    putShort(out, 21, codec);  // attributes: the codec; CreateTime, not transactional, not control
    putInt(out, 23, count - 1);  // last offset delta
    putLong(out, 27, timestamps[0]);  // base timestamp: the first record's
    putLong(out, 35, max);
    putLong(out, 43, -1L);  // producer id
    putShort(out, 51, -1);  // producer epoch
    putInt(out, 53, -1);  // base sequence
    putInt(out, 57, count);
    CRC32C crc = new CRC32C();
    crc.update(out, ATTRIBUTES_AT, out.length - ATTRIBUTES_AT);
    putInt(out, 17, (int) crc.getValue());
    return out;
  }

  /** Kafka's codecs, with the framing its clients use; compressors are kept for the task's life. */
  static final class Codecs {
    private ZstdCompressCtx zstd;
    private int zstdLevel;
    private LZ4Compressor lz4;
    private int lz4Level;

    /** {@code data[0, length)} compressed, after {@code room} bytes left free for the header. */
    byte[] compress(int codec, int level, byte[] data, int length, int room) {
      switch (codec) {
        case 1:
          return streamed(data, length, room, out -> new LeveledGzip(out, level));
        case 2:
          return streamed(data, length, room, SnappyOutputStream::new);  // xerial's framing, as Kafka's
        case 3:
          return lz4(level, data, length, room);
        case 4:
          return zstd(level, data, length, room);
        default:
          throw new IllegalArgumentException("unknown codec id " + codec);
      }
    }

    private byte[] zstd(int level, byte[] data, int length, int room) {
      if (zstd == null || zstdLevel != level) {
        if (zstd != null) {
          zstd.close();
        }
        zstd = new ZstdCompressCtx().setLevel(level).setContentSize(false);  // as Kafka's stream writes
        zstdLevel = level;
      }
      byte[] out = new byte[room + (int) Zstd.compressBound(length)];
      int n = zstd.compressByteArray(out, room, out.length - room, data, 0, length);
      return Arrays.copyOf(out, room + n);
    }

    /** Kafka's lz4 framing: independent 64 KiB blocks, no checksums; a block that does not shrink is stored. */
    private byte[] lz4(int level, byte[] data, int length, int room) {
      if (lz4 == null || lz4Level != level) {
        lz4Level = level;
        LZ4Factory factory = LZ4Factory.fastestInstance();
        lz4 = level == LZ4_DEFAULT_LEVEL ? factory.fastCompressor() : factory.highCompressor(level);
      }
      int blocks = (length + LZ4_BLOCK - 1) / LZ4_BLOCK;
      byte[] out = new byte[room + LZ4_FRAME.length + blocks * 4 + lz4.maxCompressedLength(length) + 4];
      int at = room;
      System.arraycopy(LZ4_FRAME, 0, out, at, LZ4_FRAME.length);
      at += LZ4_FRAME.length;
      for (int start = 0; start < length; start += LZ4_BLOCK) {
        int n = Math.min(LZ4_BLOCK, length - start);
        int packed = lz4.compress(data, start, n, out, at + 4, out.length - at - 4);
        if (packed >= n) {
          System.arraycopy(data, start, out, at + 4, n);
          putIntLE(out, at, n | 0x80000000);
          at += 4 + n;
        } else {
          putIntLE(out, at, packed);
          at += 4 + packed;
        }
      }
      putIntLE(out, at, 0);  // the end mark
      return Arrays.copyOf(out, at + 4);
    }

    private interface Wrap {
      OutputStream wrap(OutputStream out) throws IOException;
    }

    private static byte[] streamed(byte[] data, int length, int room, Wrap wrap) {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream(room + length / 2 + 64);
      bytes.write(new byte[room], 0, room);
      try (OutputStream out = wrap.wrap(bytes)) {
        out.write(data, 0, length);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return bytes.toByteArray();
    }
  }

  /** gzip at a level; Kafka's default (-1) is zlib's own, 6. */
  private static final class LeveledGzip extends GZIPOutputStream {
    LeveledGzip(OutputStream out, int level) throws IOException {
      super(out, 8192);
      def.setLevel(level == -1 ? Deflater.DEFAULT_COMPRESSION : level);
    }
  }

  static int varintSize(int v) {
    int z = (v << 1) ^ (v >> 31);
    int n = 1;
    while ((z & 0xffffff80) != 0) {
      z >>>= 7;
      n++;
    }
    return n;
  }

  static int varlongSize(long v) {
    long z = (v << 1) ^ (v >> 63);
    int n = 1;
    while ((z & 0xffffffffffffff80L) != 0) {
      z >>>= 7;
      n++;
    }
    return n;
  }

  private static int putVarint(byte[] b, int at, int v) {
    int z = (v << 1) ^ (v >> 31);
    while ((z & 0xffffff80) != 0) {
      b[at++] = (byte) ((z & 0x7f) | 0x80);
      z >>>= 7;
    }
    b[at++] = (byte) z;
    return at;
  }

  private static int putVarlong(byte[] b, int at, long v) {
    long z = (v << 1) ^ (v >> 63);
    while ((z & 0xffffffffffffff80L) != 0) {
      b[at++] = (byte) ((z & 0x7f) | 0x80);
      z >>>= 7;
    }
    b[at++] = (byte) z;
    return at;
  }

  private static void putLong(byte[] b, int at, long v) {
    putInt(b, at, (int) (v >>> 32));
    putInt(b, at + 4, (int) v);
  }

  private static void putInt(byte[] b, int at, int v) {
    b[at] = (byte) (v >>> 24);
    b[at + 1] = (byte) (v >>> 16);
    b[at + 2] = (byte) (v >>> 8);
    b[at + 3] = (byte) v;
  }

  private static void putShort(byte[] b, int at, int v) {
    b[at] = (byte) (v >>> 8);
    b[at + 1] = (byte) v;
  }

  private static void putIntLE(byte[] b, int at, int v) {
    b[at] = (byte) v;
    b[at + 1] = (byte) (v >>> 8);
    b[at + 2] = (byte) (v >>> 16);
    b[at + 3] = (byte) (v >>> 24);
  }
}
