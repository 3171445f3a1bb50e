"""Kafka's transaction coordinator as pure pieces: the state table (``state``), a transactional id's
metadata (``metadata``), the outcome of each request (``coordinator``) and the ``__transaction_state``
record bytes (``log_records``). They do no I/O; the broker's handlers for transactional producers will
call them, store what they return and replay the records at start."""
