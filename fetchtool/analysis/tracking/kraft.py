"""KRaft voters' Fetch of the metadata log: Raft replication on the controller listener, not a consumer's or a
follower's fetch, and never in a fetch session (session id 0, epoch -1, by design)."""

from __future__ import annotations

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = "00000000-0000-0000-0000-000000000001"  # Uuid.METADATA_TOPIC_ID


def is_kraft_voter_fetch(ex) -> bool:
    """A sessionless Fetch of __cluster_metadata only: what savings and session findings leave out."""
    if ex.session_id or not ex.request_partitions:
        return False
    for p in ex.request_partitions:
        if p.topic_id != METADATA_TOPIC_ID and p.topic != METADATA_TOPIC:
            return False
    return True
