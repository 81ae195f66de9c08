"""Kafka request and response headers, and which header version each (api key, version) uses.

Request header v1: ApiKey i16, ApiVersion i16, CorrelationId i32, ClientId (int16-length nullable string).
Request header v2 adds a tagged-field section; ClientId keeps its int16 length even there (it is declared
"flexibleVersions": "none"). Response header v0 is just CorrelationId; v1 adds tagged fields.
A flexible API version uses request header v2 / response header v1, except that ApiVersions responses always
use header v0 (KIP-511: a client must be able to read the answer before it knows what the broker speaks).
"""

from __future__ import annotations

from struct import Struct
from typing import NamedTuple

FETCH = 1
METADATA = 3
CONTROLLED_SHUTDOWN = 7
API_VERSIONS = 18
FETCH_SNAPSHOT = 59

# api key -> (name, highest version known, first flexible version or None).
# Generated from the Kafka 4.3 message JSON shipped in kafka-python 3.0.12 and kio 0.6.5's schema index, plus
# the inter-broker APIs removed in Kafka 4.0 (4-7) that older clusters still put on the wire.
APIS: dict[int, tuple[str, int, int | None]] = {
    0: ("Produce", 13, 9), 1: ("Fetch", 18, 12), 2: ("ListOffsets", 11, 6), 3: ("Metadata", 13, 9),
    4: ("LeaderAndIsr", 7, 4), 5: ("StopReplica", 4, 2), 6: ("UpdateMetadata", 8, 6),
    7: ("ControlledShutdown", 3, 3), 8: ("OffsetCommit", 10, 8), 9: ("OffsetFetch", 10, 6),
    10: ("FindCoordinator", 6, 3), 11: ("JoinGroup", 9, 6), 12: ("Heartbeat", 4, 4), 13: ("LeaveGroup", 5, 4),
    14: ("SyncGroup", 5, 4), 15: ("DescribeGroups", 6, 5), 16: ("ListGroups", 5, 3),
    17: ("SaslHandshake", 1, None), 18: ("ApiVersions", 4, 3), 19: ("CreateTopics", 7, 5),
    20: ("DeleteTopics", 6, 4), 21: ("DeleteRecords", 2, 2), 22: ("InitProducerId", 6, 2),
    23: ("OffsetForLeaderEpoch", 4, 4), 24: ("AddPartitionsToTxn", 5, 3), 25: ("AddOffsetsToTxn", 4, 3),
    26: ("EndTxn", 5, 3), 27: ("WriteTxnMarkers", 2, 1), 28: ("TxnOffsetCommit", 5, 3),
    29: ("DescribeAcls", 3, 2), 30: ("CreateAcls", 3, 2), 31: ("DeleteAcls", 3, 2),
    32: ("DescribeConfigs", 4, 4), 33: ("AlterConfigs", 2, 2), 34: ("AlterReplicaLogDirs", 2, 2),
    35: ("DescribeLogDirs", 5, 2), 36: ("SaslAuthenticate", 2, 2), 37: ("CreatePartitions", 3, 2),
    38: ("CreateDelegationToken", 3, 2), 39: ("RenewDelegationToken", 2, 2),
    40: ("ExpireDelegationToken", 2, 2), 41: ("DescribeDelegationToken", 3, 2), 42: ("DeleteGroups", 2, 2),
    43: ("ElectLeaders", 2, 2), 44: ("IncrementalAlterConfigs", 1, 1),
    45: ("AlterPartitionReassignments", 1, 0), 46: ("ListPartitionReassignments", 0, 0),
    47: ("OffsetDelete", 0, None), 48: ("DescribeClientQuotas", 1, 1), 49: ("AlterClientQuotas", 1, 1),
    50: ("DescribeUserScramCredentials", 0, 0), 51: ("AlterUserScramCredentials", 0, 0), 52: ("Vote", 2, 0),
    53: ("BeginQuorumEpoch", 1, 1), 54: ("EndQuorumEpoch", 1, 1), 55: ("DescribeQuorum", 2, 0),
    56: ("AlterPartition", 3, 2), 57: ("UpdateFeatures", 2, 0), 58: ("Envelope", 0, 0),
    59: ("FetchSnapshot", 1, 0), 60: ("DescribeCluster", 2, 0), 61: ("DescribeProducers", 0, 0),
    62: ("BrokerRegistration", 4, 0), 63: ("BrokerHeartbeat", 2, 0), 64: ("UnregisterBroker", 0, 0),
    65: ("DescribeTransactions", 0, 0), 66: ("ListTransactions", 2, 0), 67: ("AllocateProducerIds", 0, 0),
    68: ("ConsumerGroupHeartbeat", 1, 0), 69: ("ConsumerGroupDescribe", 1, 0),
    70: ("ControllerRegistration", 0, 0), 71: ("GetTelemetrySubscriptions", 0, 0), 72: ("PushTelemetry", 0, 0),
    73: ("AssignReplicasToDirs", 0, 0), 74: ("ListConfigResources", 1, 0), 75: ("DescribeTopicPartitions", 0, 0),
    76: ("ShareGroupHeartbeat", 1, 1), 77: ("ShareGroupDescribe", 1, 1), 78: ("ShareFetch", 2, 1),
    79: ("ShareAcknowledge", 2, 1), 80: ("AddRaftVoter", 1, 0), 81: ("RemoveRaftVoter", 0, 0),
    82: ("UpdateRaftVoter", 0, 0), 83: ("InitializeShareGroupState", 0, 0), 84: ("ReadShareGroupState", 0, 0),
    85: ("WriteShareGroupState", 1, 0), 86: ("DeleteShareGroupState", 0, 0),
    87: ("ReadShareGroupStateSummary", 1, 0), 88: ("StreamsGroupHeartbeat", 0, 0),
    89: ("StreamsGroupDescribe", 0, 0), 90: ("DescribeShareGroupOffsets", 1, 0),
    91: ("AlterShareGroupOffsets", 0, 0), 92: ("DeleteShareGroupOffsets", 0, 0),
}

# Versions newer than our table by this much still count as plausible (newer clients and brokers exist).
VERSION_SLACK = 3
MAX_CLIENT_ID = 4096  # longer client ids are not seen in practice; a resync uses this to reject noise

_HDR = Struct(">hhih")  # api key, api version, correlation id, client id length
_I32 = Struct(">i")


def api_name(api_key: int) -> str:
    entry = APIS.get(api_key)
    return entry[0] if entry else f"ApiKey{api_key}"


def is_flexible(api_key: int, version: int) -> bool:
    entry = APIS.get(api_key)
    if entry is None or entry[2] is None:
        return False
    return version >= entry[2]


def v0_request_header(api_key: int, version: int) -> bool:
    """ControlledShutdown v0's request header has no client id: the one request header v0."""
    return api_key == CONTROLLED_SHUTDOWN and version == 0


def request_header_version(api_key: int, version: int) -> int:
    if v0_request_header(api_key, version):
        return 0
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    if api_key == API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, version) else 0


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame payload


class HeaderError(ValueError):
    """A header that does not parse."""


def _skip_tagged_fields(buf, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise HeaderError("tagged field runs past the end of the frame")
    return pos


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end or shift > 28:
            raise HeaderError("bad unsigned varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def parse_request_header(payload) -> RequestHeader:
    """Parse the request header at the start of a frame payload (size prefix already removed)."""
    if len(payload) < 8:
        raise HeaderError(f"request of {len(payload)} bytes is shorter than a header")
    api_key, version = payload[0] << 8 | payload[1], payload[2] << 8 | payload[3]
    api_key, version = (api_key - 0x10000 if api_key & 0x8000 else api_key), (
        version - 0x10000 if version & 0x8000 else version
    )
    correlation_id = _I32.unpack_from(payload, 4)[0]
    hv = request_header_version(api_key, version)
    if hv == 0:
        return RequestHeader(api_key, version, correlation_id, None, 8)
    if len(payload) < 10:
        raise HeaderError("request header cut before the client id")
    n = payload[8] << 8 | payload[9]
    if n & 0x8000:
        n -= 0x10000
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > len(payload):
            raise HeaderError("client id runs past the end of the frame")
        client_id = bytes(payload[pos : pos + n]).decode("utf-8", "replace")
        pos += n
    elif n != -1:
        raise HeaderError(f"client id length {n}")
    if hv == 2:
        pos = _skip_tagged_fields(payload, pos)
    return RequestHeader(api_key, version, correlation_id, client_id, pos)


def response_body_offset(payload, api_key: int, version: int) -> int:
    """Where the response body starts (after CorrelationId and, for header v1, its tagged fields)."""
    if response_header_version(api_key, version) == 0:
        return 4
    return _skip_tagged_fields(payload, 4)


# api key -> the highest version a plausible request of it may carry (plausible_request_start)
_TOP_VERSION = {key: top + VERSION_SLACK for key, (_name, top, _flexible) in APIS.items()}
_SIZE_HDR = Struct(">ihhih")  # size prefix, then _HDR


def plausible_request_start(buf, pos: int, max_size: int) -> bool | None:
    """Could a request frame (with its size prefix) start at buf[pos]? None: not enough bytes to tell."""
    if len(buf) - pos < 14:
        return None
    size, api_key, version, _, n = _SIZE_HDR.unpack_from(buf, pos)
    if size < 8 or size > max_size:
        return False
    top = _TOP_VERSION.get(api_key)
    if top is None or version < 0 or version > top:
        return False
    if v0_request_header(api_key, version):
        return True
    return -1 <= n <= MAX_CLIENT_ID and 10 + max(n, 0) <= size


def encode_request_header(api_key: int, version: int, correlation_id: int, client_id: str | None) -> bytes:
    hv = request_header_version(api_key, version)
    out = bytearray(Struct(">hhi").pack(api_key, version, correlation_id))
    if hv == 0:
        return bytes(out)
    if client_id is None:
        out += b"\xff\xff"
    else:
        raw = client_id.encode()
        out += len(raw).to_bytes(2, "big") + raw
    if hv == 2:
        out += b"\x00"  # no tagged fields
    return bytes(out)


def encode_response_header(api_key: int, version: int, correlation_id: int) -> bytes:
    raw = _I32.pack(correlation_id)
    return raw + b"\x00" if response_header_version(api_key, version) == 1 else raw
