"""broker_record.py reads Kafka's own record right: real lines from Kafka 4.3.1 runs, and every committed log.

The lines below are copied verbatim from live runs of tools/kafka_peer.py (Kafka 4.3.1, a console consumer and
kafka-python consumers; cache of 8 slots, a broker killed and restarted under them) and from the committed logs of
captures/kafka/ (evictions, a follower's privileged session, an emptied session), which the parametrized tests
also read in full. No 71 or 106 line exists in any real run yet, so their patterns are only checked to leave no
line of the two loggers unread.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import broker_record as br

ROOT = Path(__file__).resolve().parents[2]
KAFKA_CAPTURES = ROOT / "captures" / "kafka"

CREATED_V18 = (
    "[2026-11-24T05:30:56,869] DEBUG [Shard 0] Created fetch session FetchSession(id=110303637, privileged=false, "
    "partitionMap.size=3, usesTopicIds=true, creationMs=1795498256867, lastUsedMs=1795498256867, epoch=1) "
    "(org.apache.kafka.server.FetchSessionCacheShard)")
CREATED_V12 = (
    "[2026-11-24T05:35:38,294] DEBUG [Shard 0] Created fetch session FetchSession(id=141337690, privileged=false, "
    "partitionMap.size=1, usesTopicIds=false, creationMs=1795498538288, lastUsedMs=1795498538288, epoch=1) "
    "(org.apache.kafka.server.FetchSessionCacheShard)")
INCREMENTAL = (
    "[2026-11-24T05:30:58,176] DEBUG Created a new incremental FetchContext for session id 110303637, epoch 9: "
    "added 0 partition(s), updated 1 partition(s), removed 0 partition(s) (org.apache.kafka.server.FetchManager)")
FULL_CLOSE = (
    "[2026-11-24T05:31:07,819] DEBUG Created a new full FetchContext with 0 partition(s). Removed fetch session "
    "110303637. Will not try to create a new session. (org.apache.kafka.server.FetchManager)")
FULL_NEW = ("[2026-11-24T05:35:38,296] DEBUG Created a new full FetchContext with 1 partition(s). "
            "(org.apache.kafka.server.FetchManager)")
NO_EVICTABLE = ("[2026-11-24T05:35:38,655] TRACE [Shard 0] No evictable entries found. "
                "(org.apache.kafka.server.FetchSessionCacheShard)")
REFUSED = ("[2026-11-24T05:35:38,655] DEBUG [Shard 0] No fetch session created for privileged=false, size=1. "
           "(org.apache.kafka.server.FetchSessionCacheShard)")
NOT_FOUND = ("[2026-11-24T05:35:55,035] DEBUG Session error for 1630086074: no such session ID found. "
             "(org.apache.kafka.server.FetchManager)")

# from the committed logs of captures/kafka (java-evictions, java-stale-eviction, cluster-followers)
EVICTED_BY_SIZE = (
    "[2026-11-24T05:39:44,847] TRACE [Shard 0] Evicting EvictableKey[privileged=false, size=1, id=155062128] with "
    "EvictableKey[privileged=false, size=2, id=0]. (org.apache.kafka.server.FetchSessionCacheShard)")
EVICTOR = (
    "[2026-11-24T05:39:44,847] DEBUG [Shard 0] Created fetch session FetchSession(id=53698313, privileged=false, "
    "partitionMap.size=2, usesTopicIds=true, creationMs=1795498784844, lastUsedMs=1795498784844, epoch=1) "
    "(org.apache.kafka.server.FetchSessionCacheShard)")
VICTIM_70 = ("[2026-11-24T05:39:45,656] DEBUG Session error for 155062128: no such session ID found. "
             "(org.apache.kafka.server.FetchManager)")
CANT_EVICT = (
    "[2026-11-24T05:39:46,659] TRACE [Shard 1] Can't evict EvictableKey[privileged=false, size=1, id=351282864] "
    "with EvictableKey[privileged=false, size=1, id=0] (org.apache.kafka.server.FetchSessionCacheShard)")
EVICTED_STALE = ("[2026-11-24T05:39:35,193] TRACE [Shard 3] Evicting stale FetchSession 896563865. "
                 "(org.apache.kafka.server.FetchSessionCacheShard)")
STALE_EVICTOR = (
    "[2026-11-24T05:39:35,193] DEBUG [Shard 3] Created fetch session FetchSession(id=993480576, privileged=false, "
    "partitionMap.size=1, usesTopicIds=true, creationMs=1795498775192, lastUsedMs=1795498775192, epoch=1) "
    "(org.apache.kafka.server.FetchSessionCacheShard)")
OTHER_SHARD = (
    "[2026-11-24T05:43:18,248] DEBUG [Shard 0] Created fetch session FetchSession(id=247382733, privileged=true, "
    "partitionMap.size=1, usesTopicIds=true, creationMs=1795498998246, lastUsedMs=1795498998246, epoch=1) "
    "(org.apache.kafka.server.FetchSessionCacheShard)")
EMPTIED = (
    "[2026-11-24T05:44:19,395] DEBUG Created a new sessionless FetchContext and closing session id 894174636, "
    "epoch 124: after removing 4 partition(s), there are no more partitions left. "
    "(org.apache.kafka.server.FetchManager)")

# kafka.request.logger, verbatim
REQUEST_V12_CREATES_SESSION = (
    '[2026-11-24T05:35:38,303] Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":1,'
    '"requestApiVersion":12,"correlationId":4,"clientId":"kp-0","requestApiKeyName":"FETCH"},"request":{"'
    'replicaId":-1,"maxWaitMs":100,"minBytes":1,"maxBytes":52428800,"isolationLevel":0,"sessionId":0,"ses'
    'sionEpoch":0,"topics":[{"topic":"orders","partitions":[{"partition":0,"currentLeaderEpoch":0,"fetchO'
    'ffset":0,"lastFetchedEpoch":-1,"logStartOffset":-1,"partitionMaxBytes":1048576}]}],"forgottenTopicsD'
    'ata":[],"rackId":""},"response":{"throttleTimeMs":0,"errorCode":0,"sessionId":141337690,"responses":'
    '[{"topic":"orders","partitions":[{"partitionIndex":0,"errorCode":0,"highWatermark":0,"lastStableOffs'
    'et":0,"logStartOffset":0,"abortedTransactions":null,"preferredReadReplica":-1,"recordsSizeInBytes":0'
    '}]}]},"connection":"127.0.0.1:32961-127.0.0.1:44340-0-5","totalTimeMs":136.852,"requestQueueTimeMs":'
    '2.354,"localTimeMs":12.463,"remoteTimeMs":121.577,"throttleTimeMs":0,"responseQueueTimeMs":0.123,"se'
    'ndTimeMs":0.333,"securityProtocol":"PLAINTEXT","principal":"User:ANONYMOUS","listener":"PLAINTEXT","'
    'clientInformation":{"softwareName":"kafka-python","softwareVersion":"3.0.12"}}'
)
REQUEST_V18_INCREMENTAL = (
    '[2026-11-24T05:30:58,195] Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":1,'
    '"requestApiVersion":18,"correlationId":22,"clientId":"console-consumer","requestApiKeyName":"FETCH"}'
    ',"request":{"maxWaitMs":500,"minBytes":1,"maxBytes":52428800,"isolationLevel":0,"sessionId":11030363'
    '7,"sessionEpoch":9,"topics":[{"topicId":"TOaLbBweQKqxyljpKuZJyA","partitions":[{"partition":1,"curre'
    'ntLeaderEpoch":0,"fetchOffset":41,"lastFetchedEpoch":-1,"logStartOffset":-1,"partitionMaxBytes":1048'
    '576}]}],"forgottenTopicsData":[],"rackId":""},"response":{"throttleTimeMs":0,"errorCode":0,"sessionI'
    'd":110303637,"responses":[{"topicId":"TOaLbBweQKqxyljpKuZJyA","partitions":[{"partitionIndex":1,"err'
    'orCode":0,"highWatermark":42,"lastStableOffset":42,"logStartOffset":0,"abortedTransactions":null,"pr'
    'eferredReadReplica":-1,"recordsSizeInBytes":170}]}]},"connection":"127.0.0.1:49079-127.0.0.1:57582-0'
    '-2","totalTimeMs":9.964,"requestQueueTimeMs":0.227,"localTimeMs":1.004,"remoteTimeMs":7.167,"throttl'
    'eTimeMs":0,"responseQueueTimeMs":0.86,"sendTimeMs":0.704,"securityProtocol":"PLAINTEXT","principal":'
    '"User:ANONYMOUS","listener":"PLAINTEXT","clientInformation":{"softwareName":"apache-kafka-java","sof'
    'twareVersion":"4.3.1"}}'
)
REQUEST_V12_ERROR_70 = (
    '[2026-11-24T05:35:55,039] Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":1,'
    '"requestApiVersion":12,"correlationId":2,"clientId":"kp-6","requestApiKeyName":"FETCH"},"request":{"'
    'replicaId":-1,"maxWaitMs":100,"minBytes":1,"maxBytes":52428800,"isolationLevel":0,"sessionId":163008'
    '6074,"sessionEpoch":6,"topics":[],"forgottenTopicsData":[],"rackId":""},"response":{"throttleTimeMs"'
    ':0,"errorCode":70,"sessionId":0,"responses":[]},"connection":"127.0.0.1:32961-127.0.0.1:44258-2-0","'
    'totalTimeMs":5.966,"requestQueueTimeMs":1.175,"localTimeMs":4.584,"remoteTimeMs":0.0,"throttleTimeMs'
    '":0,"responseQueueTimeMs":0.061,"sendTimeMs":0.145,"securityProtocol":"PLAINTEXT","principal":"User:'
    'ANONYMOUS","listener":"PLAINTEXT","clientInformation":{"softwareName":"kafka-python","softwareVersio'
    'n":"3.0.12"}}'
)
REQUEST_V18_CLOSE = (
    '[2026-11-24T05:31:07,820] Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":1,'
    '"requestApiVersion":18,"correlationId":194,"clientId":"console-consumer","requestApiKeyName":"FETCH"'
    '},"request":{"maxWaitMs":500,"minBytes":1,"maxBytes":52428800,"isolationLevel":0,"sessionId":1103036'
    '37,"sessionEpoch":-1,"topics":[],"forgottenTopicsData":[],"rackId":""},"response":{"throttleTimeMs":'
    '0,"errorCode":0,"sessionId":0,"responses":[]},"connection":"127.0.0.1:49079-127.0.0.1:57582-0-2","to'
    'talTimeMs":3.66,"requestQueueTimeMs":0.092,"localTimeMs":3.487,"remoteTimeMs":0.0,"throttleTimeMs":0'
    ',"responseQueueTimeMs":0.029,"sendTimeMs":0.051,"securityProtocol":"PLAINTEXT","principal":"User:ANO'
    'NYMOUS","listener":"PLAINTEXT","clientInformation":{"softwareName":"apache-kafka-java","softwareVers'
    'ion":"4.3.1"}}'
)


def sessions(*lines: str) -> br.SessionsLog:
    return br.parse_sessions_log([line + "\n" for line in lines])


def test_a_created_session_reads_as_its_shard_id_size_and_topic_id_mode():
    log = sessions(CREATED_V18, CREATED_V12)
    v18, v12 = log.created
    assert (v18.shard, v18.session_id, v18.privileged, v18.size, v18.uses_topic_ids, v18.epoch) == (
        0, 110303637, False, 3, True, 1)
    assert (v12.session_id, v12.size, v12.uses_topic_ids) == (141337690, 1, False)
    # the log's wall clock (UTC) and Kafka's creationMs agree within the few ms between them
    assert abs(v18.ts - v18.creation_ms / 1000) < 0.01


def test_an_incremental_context_gives_the_counts_and_the_epoch_the_request_carried():
    (inc,) = sessions(INCREMENTAL).incremental
    assert (inc.session_id, inc.epoch, inc.added, inc.updated, inc.removed) == (110303637, 9, 0, 1, 0)
    assert inc.request_epoch == 8  # Kafka logs the epoch after bumping it
    assert br.previous_epoch(1) == 2**31 - 1 and br.next_epoch(2**31 - 1) == 1


def test_a_full_request_that_closes_its_session_names_it():
    log = sessions(FULL_NEW, FULL_CLOSE)
    new, close = log.full
    assert (new.partitions, new.removed_session, new.sessionless) == (1, None, False)
    assert (close.partitions, close.removed_session, close.sessionless) == (0, 110303637, True)
    assert log.closed_by_full == [close]


def test_a_refusal_and_a_not_found_error_are_recorded_and_failed_eviction_tries_are_not_noise():
    log = sessions(NO_EVICTABLE, REFUSED, NOT_FOUND)
    assert [(r.shard, r.privileged, r.size) for r in log.refused] == [(0, False, 1)]
    assert [(e.session_id, e.code) for e in log.errors] == [(1630086074, br.FETCH_SESSION_ID_NOT_FOUND)]
    assert log.evictions == [] and log.unparsed == []


def test_an_eviction_by_size_names_its_victim_and_the_next_session_created_in_that_shard_as_evictor():
    log = sessions(EVICTED_BY_SIZE, EVICTOR, VICTIM_70, CANT_EVICT)
    (e,) = log.evictions
    assert (e.shard, e.victim_id, e.stale, e.victim_privileged, e.victim_size, e.evictor_size) == (
        0, 155062128, False, False, 1, 2)
    assert e.evictor == log.created[0] and e.evictor.session_id == 53698313
    assert [(x.session_id, x.code) for x in log.errors] == [(155062128, 70)]
    assert log.unparsed == []  # "Can't evict" is a failed attempt, not an eviction


def test_a_stale_eviction_takes_its_evictor_from_its_own_shard_only():
    # a creation in another shard between the two lines is not the evictor
    log = sessions(EVICTED_STALE, OTHER_SHARD, STALE_EVICTOR)
    (e,) = log.evictions
    assert (e.shard, e.victim_id, e.stale, e.victim_size) == (3, 896563865, True, None)
    assert e.evictor is not None and e.evictor.session_id == 993480576
    assert log.created[0].privileged  # a follower's session


def test_an_incremental_fetch_that_forgets_every_partition_closes_the_session():
    (e,) = sessions(EMPTIED).emptied
    assert (e.session_id, e.epoch, e.removed) == (894174636, 124, 4)


def test_a_v12_fetch_line_gives_the_client_connection_names_and_the_new_session():
    (f,) = br.parse_requests_log([REQUEST_V12_CREATES_SESSION])
    assert (f.broker, f.client, f.api_version, f.correlation_id, f.client_id) == (
        "127.0.0.1:32961", "127.0.0.1:44340", 12, 4, "kp-0")
    assert (f.replica_id, f.max_wait_ms, f.min_bytes, f.max_bytes, f.isolation_level) == (-1, 100, 1, 52428800, 0)
    assert (f.session_id, f.session_epoch, f.response_session_id, f.error_code) == (0, 0, 141337690, 0)
    assert [(p.topic, p.partition, p.fetch_offset) for p in f.partitions] == [("orders", 0, 0)]
    assert [(p.topic, p.partition, p.error_code, p.records_bytes) for p in f.response_partitions] == [
        ("orders", 0, 0, 0)]
    assert f.client_software == "kafka-python/3.0.12"
    assert f.received_ts == pytest.approx(f.ts - 0.136852)


def test_a_v18_fetch_line_gives_topic_ids_in_uuid_form_and_records_sizes():
    (f,) = br.parse_requests_log([REQUEST_V18_INCREMENTAL])
    assert (f.api_version, f.client_id, f.session_id, f.session_epoch) == (18, "console-consumer", 110303637, 9)
    assert f.replica_id == -1  # v15+ carries no replicaId for a consumer
    assert [p.topic for p in f.partitions] == ["4ce68b6c-1c1e-40aa-b1ca-58e92ae649c8"]
    assert br.topic_id_text("TOaLbBweQKqxyljpKuZJyA") == "4ce68b6c-1c1e-40aa-b1ca-58e92ae649c8"
    assert f.records_bytes == 170 and f.partition_errors == 0


def test_an_error_70_line_and_a_closing_line():
    (e,) = br.parse_requests_log([REQUEST_V12_ERROR_70])
    assert (e.session_id, e.session_epoch, e.error_code, e.response_session_id) == (1630086074, 6, 70, 0)
    (c,) = br.parse_requests_log([REQUEST_V18_CLOSE])
    assert (c.session_id, c.session_epoch, c.response_session_id) == (110303637, -1, 0)


def test_the_owner_of_a_session_is_the_connection_whose_full_fetch_got_it():
    record = br.BrokerRecord(sessions={}, fetches=br.parse_requests_log(
        [REQUEST_V12_CREATES_SESSION, REQUEST_V12_ERROR_70]))
    owners = record.owners()
    assert {k: f.client for k, f in owners.items()} == {("127.0.0.1:32961", 141337690): "127.0.0.1:44340"}


# ---------------------------------------------------------------------------------------------------------------
# Every committed log, in full


def committed(kind: str) -> list:
    if not KAFKA_CAPTURES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason="no captures/kafka yet"))]
    paths = sorted(p for p in KAFKA_CAPTURES.iterdir() if kind in p.name and p.name.endswith((".log", ".log.gz")))
    return [pytest.param(p, id=p.name) for p in paths] or [
        pytest.param(None, marks=pytest.mark.skip(reason=f"no {kind} log committed yet"))]


SHARD_OR_MANAGER = re.compile(r"\((org\.apache\.kafka\.server\.(FetchSessionCacheShard|FetchManager))\)\s*$")


@pytest.mark.parametrize("path", committed("sessions"))
def test_every_line_of_a_committed_sessions_log_is_understood(path):
    lines = list(br.open_text(path))
    log = br.read_sessions_log(path)
    assert log.unparsed == []
    # counted independently of the parser's patterns, by the message's fixed words
    text = "".join(lines)
    assert len(log.created) == text.count("Created fetch session FetchSession(")
    assert len(log.refused) == text.count("No fetch session created for")
    assert len(log.evictions) == text.count("] Evicting ")
    assert len(log.full) == text.count("Created a new full FetchContext")
    assert len(log.incremental) == text.count("Created a new incremental FetchContext")
    assert len(log.errors) == text.count("Session error for ")
    known = len(log.created) + len(log.refused) + len(log.evictions) + len(log.full) + len(log.incremental) + len(
        log.errors) + len(log.emptied)
    noise = sum(1 for line in lines if any(s in line for s in (
        "No evictable entries found.", "There are no cache entries to evict.", "Can't evict ")))
    assert known + noise == sum(1 for line in lines if SHARD_OR_MANAGER.search(line))


@pytest.mark.parametrize("path", committed("sessions"))
def test_every_eviction_in_a_committed_log_has_its_evictor_in_the_same_shard(path):
    log = br.read_sessions_log(path)
    for e in log.evictions:
        assert e.evictor is not None, f"line {e.line}: no session created after the eviction"
        assert e.evictor.shard == e.shard and e.evictor.line > e.line
        if not e.stale:
            assert e.evictor.size == e.evictor_size  # the EvictableKey it used is the new session's size
        # the victim is a session this log created before the eviction, and never used after it
        victim = [c for c in log.created if c.session_id == e.victim_id and c.line < e.line]
        assert victim, f"line {e.line}: victim {e.victim_id} was never created"
        assert not [i for i in log.incremental if i.session_id == e.victim_id and i.line > e.line
                    and not [c for c in log.created if c.session_id == e.victim_id and e.line < c.line < i.line]]


@pytest.mark.parametrize("path", committed("requests"))
def test_every_fetch_line_of_a_committed_request_log_is_read(path):
    raw = [line for line in br.open_text(path) if '"requestApiKeyName":"FETCH"' in line]
    fetches = br.read_requests_log(path)
    assert len(fetches) == len(raw)
    for f in fetches:
        assert f.client.count(":") == 1 and f.broker.count(":") == 1
        assert f.response_session_id is not None or f.api_version < 7
