"""compactlog: a Kafka-compatible keyed commit log."""
