"""Kafka's log cleaner: offset map, survival rule, segment grouping, selection, rewrite and swap."""
