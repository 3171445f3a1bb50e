"""Storage: segments, partition logs, checkpoints, recovery, configs, retention, the log manager."""
