"""What incremental fetch saves (or would save): the estimate replayed through the session engine."""
