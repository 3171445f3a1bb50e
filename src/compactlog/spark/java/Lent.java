package compactlog.spark;

import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One of the worker's Arrow vectors, lent to Spark until the reader's next batch (the runner refills
 * the same vectors batch after batch). It is not an {@link ArrowColumnVector} on purpose: Spark hands
 * Arrow vectors straight to Python UDFs and keeps them until each batch's results come back, by which
 * time they hold another batch. Any other vector Spark reads at once, row by row.
 */
final class Lent extends ColumnVector {
  private final ColumnVector vector;

  Lent(ColumnVector vector) {
    super(vector.dataType());
    this.vector = vector;
  }

  @Override
  public void close() {
    // The runner owns the buffers.
  }

  @Override
  public boolean hasNull() {
    return vector.hasNull();
  }

  @Override
  public int numNulls() {
    return vector.numNulls();
  }

  @Override
  public boolean isNullAt(int row) {
    return vector.isNullAt(row);
  }

  @Override
  public boolean getBoolean(int row) {
    return vector.getBoolean(row);
  }

  @Override
  public byte getByte(int row) {
    return vector.getByte(row);
  }

  @Override
  public short getShort(int row) {
    return vector.getShort(row);
  }

  @Override
  public int getInt(int row) {
    return vector.getInt(row);
  }

  @Override
  public long getLong(int row) {
    return vector.getLong(row);
  }

  @Override
  public float getFloat(int row) {
    return vector.getFloat(row);
  }

  @Override
  public double getDouble(int row) {
    return vector.getDouble(row);
  }

  @Override
  public ColumnarArray getArray(int row) {
    return vector.getArray(row);
  }

  @Override
  public ColumnarMap getMap(int row) {
    return vector.getMap(row);
  }

  @Override
  public Decimal getDecimal(int row, int precision, int scale) {
    return vector.getDecimal(row, precision, scale);
  }

  @Override
  public UTF8String getUTF8String(int row) {
    return vector.getUTF8String(row);
  }

  @Override
  public byte[] getBinary(int row) {
    return vector.getBinary(row);
  }

  @Override
  public ColumnVector getChild(int ordinal) {
    return vector.getChild(ordinal);
  }
}
