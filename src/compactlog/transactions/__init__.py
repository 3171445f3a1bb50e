"""Kafka's transaction coordinator as pure pieces: the state table (``state``), a transactional id's
metadata (``metadata``), the outcome of each request (``coordinator``), the ``__transaction_state``
record bytes (``log_records``) and their replay at start (``load``). They do no I/O but ``load``'s read of
a partition through the embedded API; the broker's handlers for transactional producers will call them,
store what they return and replay the records at start."""
