"""fetchtool: analyse and replay Apache Kafka Fetch traffic (KIP-227 sessions, KIP-74 limits, KIP-630 snapshots)."""

__version__ = "0.1.0"
