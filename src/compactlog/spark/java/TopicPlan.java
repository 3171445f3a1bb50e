package compactlog.spark;

import java.io.Serializable;
import java.util.HashMap;

/**
 * What the Python side's producer plan says for one topic ({@code compactlog.spark.produced.plan_text}):
 * the JVM builds batches by it and decides none of it.
 */
final class TopicPlan implements Serializable {
  final String topic;
  final int partitions;
  final int codec;  // Kafka's codec id
  final int level;  // spelled out: the config's own default value where none was set
  final int batchBytes;  // the producer's batch.size, which the sticky partitioner counts
  final int target;  // where batches are cut: batch.size within the limit; 0 is a record a batch
  final int limit;  // the largest batch the log takes
  final int plainLimit;  // the most a batch's records may take uncompressed (the validator's bound)

  private TopicPlan(String[] f) {
    topic = f[0];
    partitions = Integer.parseInt(f[1]);
    codec = Integer.parseInt(f[2]);
    level = Integer.parseInt(f[3]);
    batchBytes = Integer.parseInt(f[4]);
    target = Integer.parseInt(f[5]);
    limit = Integer.parseInt(f[6]);
    plainLimit = Integer.parseInt(f[7]);
  }

  /** The plan's lines, one a topic, tab-separated. */
  static HashMap<String, TopicPlan> parse(String text) {
    HashMap<String, TopicPlan> plans = new HashMap<>();
    for (String line : text.split("\n")) {
      if (!line.isEmpty()) {
        String[] f = line.split("\t");
        if (f.length != 8) {
          throw new IllegalStateException("compactlog's write plan has a line of " + f.length
              + " fields, not 8: " + line);
        }
        plans.put(f[0], new TopicPlan(f));
      }
    }
    return plans;
  }
}
