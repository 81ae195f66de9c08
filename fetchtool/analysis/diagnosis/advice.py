"""Finding codes, their severity, and the advice a support engineer can act on (client version, setting, config).

The codes are design.md's stable table; SESSIONS_NOT_GRANTED is an addition (a broker that never grants a
session, such as tansu or one with max.incremental.fetch.session.cache.slots=0, gets one info finding, not
an alarm per fetch). MAX_WAIT_IGNORED, MAX_WAIT_ZERO, FETCH_ERROR_LOOP and PARTITION_ERROR_PERSISTS are the
traffic findings (fetchtool.analysis.diagnosis.traffic, thresholds there).
"""

from __future__ import annotations

from fetchtool.analysis.model import ERROR, INFO, WARNING

SEVERITY: dict[str, str] = {
    "FETCH_SESSION_ID_NOT_FOUND": ERROR,
    "INVALID_FETCH_SESSION_EPOCH": ERROR,
    "FETCH_SESSION_TOPIC_ID_ERROR": ERROR,
    "SESSION_CHURN": WARNING,
    "CACHE_FULL": WARNING,
    "EVICTION_PRESSURE": WARNING,
    "SESSIONLESS_CLIENT": INFO,
    "PARTITION_STARVATION": WARNING,
    "RESPONSE_OVER_MAX_BYTES": WARNING,
    "SNAPSHOT_ERROR": ERROR,
    "REQUEST_MISSING": INFO,
    "RESPONSE_MISSING": INFO,
    "CAPTURE_GAP": INFO,
    "SESSIONS_NOT_GRANTED": INFO,
    "BROKER_LOST": ERROR,
    "STALE_EVICTION": WARNING,
    "SESSION_DROPPED_WITHOUT_ERROR": WARNING,
    "MAX_WAIT_IGNORED": WARNING,
    "MAX_WAIT_ZERO": WARNING,
    "FETCH_ERROR_LOOP": WARNING,
    "PARTITION_ERROR_PERSISTS": ERROR,
}

SLOTS = "max.incremental.fetch.session.cache.slots"
METER = "kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec"

ADVICE: dict[tuple[str, str | None], str] = {
    ("FETCH_SESSION_ID_NOT_FOUND", "evicted"): (
        f"Raise {SLOTS} on the broker (default 1000, divided into 8 shards of 125 since Kafka 3.8) and fix the "
        f"clients named in EVICTION_PRESSURE that create sessions fastest; watch {METER}."
    ),
    ("FETCH_SESSION_ID_NOT_FOUND", "evicted_stale"): (
        "The client left its session unused for over 120 s (Kafka's minimum eviction time), so the next new "
        "session in its shard took the slot: look at that client (a paused or stuck consumer, a long GC pause, "
        "a poll loop blocked by processing); the cache size is not the cause. The client recovers with a full fetch."
    ),
    ("FETCH_SESSION_ID_NOT_FOUND", "broker_restart"): (
        "Sessions live only in broker memory, so one such error per client after a broker restart is expected "
        "and self-healing; check the broker's logs for the restart or failover at this time if it was unplanned."
    ),
    ("FETCH_SESSION_ID_NOT_FOUND", "closed_by_client"): (
        "The client kept using a session it had closed itself: a client bug. Upgrade the client library, or turn "
        "its sessions off (kafka-python enable_incremental_fetch_sessions=False, franz-go kgo.DisableFetchSessions())."
    ),
    ("FETCH_SESSION_ID_NOT_FOUND", "unknown"): (
        f"Re-run with --cache-slots/--cache-shards set to the broker's {SLOTS}, capture from before the "
        f"session's last successful fetch, and compare with {METER} and the broker's restart times."
    ),
    ("INVALID_FETCH_SESSION_EPOCH", "duplicate_request"): (
        "The client re-sent an epoch the broker had already processed (a retry after a timeout or lost response); "
        "a correct client sends (id, 0) after a network error (Java FetchSessionHandler.handleError). Upgrade the "
        "client, and raise request.timeout.ms if its fetches time out; the error is self-healing if rare."
    ),
    ("INVALID_FETCH_SESSION_EPOCH", "concurrent_requests"): (
        "Two fetches of one session were in flight at once: a client must send a session's next fetch only after "
        "it has processed the previous response, as Kafka's Java consumer does; upgrade or fix the client (it "
        "recovers with a full fetch, (id, 0))."
    ),
    ("INVALID_FETCH_SESSION_EPOCH", "epoch_skip"): (
        "The client sent an epoch other than the one the broker expects next: a client bug; upgrade the client "
        "library or turn its fetch sessions off."
    ),
    ("INVALID_FETCH_SESSION_EPOCH", "bad_wrap"): (
        "After epoch 2147483647 the next epoch must be 1 (Kafka's FetchMetadata.nextEpoch), never 0 or negative: "
        "fix the client's 32-bit epoch increment or upgrade the client library."
    ),
    ("INVALID_FETCH_SESSION_EPOCH", "unknown"): (
        "Capture from before this session's previous requests (both directions) to see which epoch the broker "
        "expected; usually self-healing, as the client then sends (id, 0)."
    ),
    ("FETCH_SESSION_TOPIC_ID_ERROR", "version_mismatch"): (
        "The session was created with one Fetch version family (v13+ uses topic ids, v12 and older names) and "
        "continued with the other, typical during a rolling upgrade or downgrade: finish the upgrade "
        "(inter.broker.protocol.version / metadata.version) so every broker and client settles on one family."
    ),
    ("FETCH_SESSION_TOPIC_ID_ERROR", "client_version_switch"): (
        "The client changed Fetch versions within one session by itself (e.g. a full fetch at v12 on a new "
        "connection before it knew the broker's versions, then v13+), not a rolling upgrade: the broker had "
        "accepted the newer version from it before. Report it to the client's maintainers with the frames; it "
        "recovers with a full fetch (a new session), so the error is self-healing if rare."
    ),
    ("FETCH_SESSION_TOPIC_ID_ERROR", "unknown"): (
        "Capture the request that created this session to see its Fetch version; check for a rolling upgrade of "
        "brokers or clients between Fetch v12 and v13."
    ),
    ("SESSION_CHURN", None): (
        "Upgrade the client: known causes are Sarama 1.26.0-1.26.1 (IBM/sarama#1644, fixed in 1.26.2) and "
        "@platformatic/kafka before 2.3.0 (platformatic/kafka#315, fixed by #316). Until then raise "
        f"{SLOTS} so its unused sessions do not keep other clients from getting one."
    ),
    ("CACHE_FULL", None): (
        f"Raise {SLOTS} on this broker and look for clients that create many sessions (SESSION_CHURN); Java "
        "clients refused a session re-try a full fetch every time."
    ),
    ("EVICTION_PRESSURE", None): (
        f"Raise {SLOTS} above the number of fetching consumers and followers on this broker (x8 shards since "
        f"3.8) and fix the named clients; watch NumIncrementalFetchSessions and {METER}."
    ),
    ("SESSIONLESS_CLIENT", None): (
        "Each fetch lists every partition both ways; a client with KIP-227 sessions (Apache Java client, franz-go, "
        "kafka-python 2.1+) sends only changes. librdkafka, aiokafka, Sarama, kafkajs and kafka-go have no sessions."
    ),
    ("SESSIONLESS_CLIENT", "after_refusal"): (
        "The client stopped asking for a session once this broker refused it one. Where the broker keeps sessions "
        f"for others (CACHE_FULL), raise {SLOTS} or free slots (SESSION_CHURN, EVICTION_PRESSURE), then check that "
        "the client asks again: one that gives up after a refusal fetches without a session until it restarts. A "
        "broker that grants no sessions at all (SESSIONS_NOT_GRANTED) leaves every client without one."
    ),
    ("PARTITION_STARVATION", None): (
        "Upgrade the broker to Kafka 3.0+ (KAFKA-12330: only partitions that returned records rotate), and raise "
        "fetch.max.bytes or lower max.partition.fetch.bytes so one response can serve more partitions."
    ),
    ("RESPONSE_OVER_MAX_BYTES", None): (
        "Apache brokers only exceed MaxBytes by the first record batch (KIP-74); check the broker implementation "
        "and version, and fetch.max.bytes / message.max.bytes."
    ),
    ("SNAPSHOT_ERROR", None): (
        "Check the leader's snapshots (SNAPSHOT_NOT_FOUND 98: the follower must re-fetch the latest snapshot; "
        "POSITION_OUT_OF_RANGE 99: the follower must restart the transfer at position 0) and controller logs."
    ),
    ("REQUEST_MISSING", None): "Start the capture earlier, or accept that the first responses cannot be paired.",
    ("RESPONSE_MISSING", None): (
        "Capture both directions on the broker host and let the capture run past the last request; a "
        "lost response also makes the client retry."
    ),
    ("RESPONSE_MISSING", "last_on_connection"): (
        "A response that only the capture missed would have let the client go on, its next requests answered on "
        "the same connection: the client got no answer either. Nothing is wrong if it closed the connection on "
        "purpose while the broker held its fetch for MaxWaitMs (a rebalance, a shutdown; franz-go closes the "
        "connection of a fetch it no longer wants). Otherwise the answer was held or lost on the way: the client "
        "times out (request.timeout.ms) and retries on a new connection; look at the network, a proxy or load "
        "balancer, and the broker's request handling at that time."
    ),
    ("CAPTURE_GAP", None): (
        "The capture dropped packets: capture with a larger buffer (tcpdump -B 65536), a snaplen of 0 and a "
        "port filter, or on the broker host."
    ),
    ("CAPTURE_GAP", "started_mid_message"): (
        "Nothing is wrong with the traffic: the capture began while this message was on the wire, so the message "
        "and any exchange it answered are cut. To see whole sessions from their creation, start the capture "
        "before the clients connect (or restart them after it starts)."
    ),
    ("STALE_EVICTION", None): (
        "The client left its session unused for over 120 s (Kafka's minimum eviction time), so a new session in "
        "its shard took the slot: look at that client (a paused or stuck consumer, a long GC pause, a poll loop "
        "blocked by processing); the cache size is not the cause."
    ),
    ("BROKER_LOST", None): (
        "The broker died or was cut off (a crash, kill -9, OOM, its host or network): check its logs and the "
        "restart reason at this time. Its fetch sessions were lost with it; clients recover with full fetches "
        "(the Java client sends (old id, 0) on its new connection, so no FETCH_SESSION_ID_NOT_FOUND follows)."
    ),
    ("SESSION_DROPPED_WITHOUT_ERROR", None): (
        "A broker problem, not a client or cache setting: Apache Kafka keeps a session that still has partitions, "
        "and answers a session it does not know with FETCH_SESSION_ID_NOT_FOUND (70) so the client starts a new "
        "one. Check the broker implementation and version (brokers without KIP-227 sessions, such as tansu or "
        "noida-db, answer session id 0); clients that follow Kafka's FetchSessionHandler fall back to a full fetch."
    ),
    ("SESSIONS_NOT_GRANTED", None): (
        "No action needed unless you expect incremental fetches: a broker without KIP-227 sessions (e.g. tansu) "
        f"or with {SLOTS}=0 answers every session-creating fetch with session id 0."
    ),
    ("MAX_WAIT_IGNORED", None): (
        "Apache Kafka holds a fetch with no data in its purgatory until MaxWaitMs (ReplicaManager.fetchMessages); "
        "find out what answers on this address (a proxy, a Kafka-compatible broker, a patched build) and fix or "
        "report it. Until then idle consumers cost a fetch per round trip: raise fetch.min.bytes on the clients "
        "only if the broker honours it, and watch the broker's request rate and CPU."
    ),
    ("MAX_WAIT_ZERO", None): (
        "Set the client's fetch wait above 0 (Java/librdkafka fetch.max.wait.ms / fetch.wait.max.ms, kafka-python "
        "and aiokafka fetch_max_wait_ms; 500 ms is the default) so the broker holds empty fetches until data "
        "arrives instead of the client asking again at once."
    ),
    ("FETCH_ERROR_LOOP", None): (
        "A correct client refreshes metadata and backs off after a partition or fetch error (Java: retry.backoff.ms, "
        "100 ms, growing to retry.backoff.max.ms): upgrade the client or raise its retry backoff, and see the "
        "partition errors table for what each code asks the client to do."
    ),
    ("PARTITION_ERROR_PERSISTS", None): (
        "See the partition errors table for the code's meaning: check the topic and its leaders on this broker "
        "(kafka-topics.sh --describe), ACLs for TOPIC_AUTHORIZATION_FAILED, the log directories for "
        "KAFKA_STORAGE_ERROR, and the client's metadata refresh for NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH."
    ),
}


def advice(code: str, cause: str | None = None) -> str:
    return ADVICE.get((code, cause)) or ADVICE.get((code, None)) or ""
