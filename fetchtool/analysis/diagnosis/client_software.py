"""The client software a capture shows, and whether it implements KIP-227 incremental fetch sessions.

Clients name themselves in ApiVersions v3+ (KIP-511: ClientSoftwareName, ClientSoftwareVersion); fetchtool
gives that per exchange as "name/version" (Exchange.client_software). `parse` turns it into a `Software`;
`sessions_support` says whether that client, at that version, uses fetch sessions.

Only names read in each client's own source are recognised (the comment on each says where). Clients that
never send ApiVersions v3 (aiokafka, kafkajs, segmentio/kafka-go: ApiVersions v0-v2 only; Sarama before
1.30.0; the Java client before 2.4.0; kafka-python before 2.1.3) cannot be named by a capture at all; their
support rows are kept for callers that know the software some other way.

A version is comparable (`release`) only when it is a plain release ("4.3.1", Go's "v1.45.0"). Anything else
is not: "7.6.0-ccs" (Confluent Platform's numbering of its kafka-clients build, not Apache's), "4.1.0-SNAPSHOT",
"2.15.0-RC1", Sarama's "dev", franz-go's "unknown". Such a version never falls in a version range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

JAVA = "apache-kafka-java"
LIBRDKAFKA = "librdkafka"
KAFKA_PYTHON = "kafka-python"
SARAMA = "sarama"
FRANZ_GO = "franz-go"
PLATFORMATIC = "platformatic-kafka"
AIOKAFKA = "aiokafka"
KAFKAJS = "kafkajs"
KAFKA_GO = "segmentio-kafka-go"
UNKNOWN = "unknown"

# ClientSoftwareName as sent -> family.
NAMES: dict[str, str] = {
    # kafka-clients ApiVersionsRequest.Builder DEFAULT_CLIENT_SOFTWARE_NAME, version AppInfoParser.getVersion()
    # (kafka-clients-4.3.1-sources.jar: org/apache/kafka/common/requests/ApiVersionsRequest.java)
    "apache-kafka-java": JAVA,
    # librdkafka rd_kafka_conf_finalize: "librdkafka" / rd_kafka_version_str() unless a binding set them
    # (confluentinc/librdkafka src/rdkafka_conf.c)
    "librdkafka": LIBRDKAFKA,
    # version "<own>-rdkafka-<librdkafka>" (confluent-kafka-python src/confluent_kafka/src/confluent_kafka.c,
    # common_conf_set_software)
    "confluent-kafka-python": LIBRDKAFKA,
    # version = librdkafka's version string (confluent-kafka-go kafka/config.go; confluent-kafka-dotnet
    # src/Confluent.Kafka/Library.cs NameAndVersionConfig = Library.VersionString)
    "confluent-kafka-go": LIBRDKAFKA,
    "confluent-kafka-dotnet": LIBRDKAFKA,
    # kafka-python kafka/net/connection.py: 'kafka-python' / __version__ (sent since 2.1.3, PR #2558)
    "kafka-python": KAFKA_PYTHON,
    # IBM/sarama api_versions_request.go defaultClientSoftwareName; version.go: Go module version or "dev"
    # (sent since v1.30.0, commit 4a17d919 "send ApiVersionsRequest on broker open")
    "sarama": SARAMA,
    # twmb/franz-go pkg/kgo/config.go defaultCfg: "kgo" / module version ("v1.18.0") or "unknown"
    "kgo": FRANZ_GO,
    # platformatic/kafka src/clients/base/options.ts clientSoftwareName; version from package.json. Sent once,
    # on the bootstrap connection only (src/clients/base/base.ts listApis), so its fetch connections carry none.
    "platformatic-kafka": PLATFORMATIC,
}

RDKAFKA_SUFFIX = "-rdkafka-"  # a binding reporting "<own version>-rdkafka-<librdkafka version>"
_RELEASE = re.compile(r"v?(\d+(?:\.\d+){1,3})")

Version = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Software:
    family: str
    name: str  # ClientSoftwareName as sent
    version: str  # ClientSoftwareVersion as sent
    release: Version | None  # the family's own release (librdkafka's for its bindings); None: not comparable


def release(text: str | None) -> Version | None:
    """(major, minor, patch[, build]) of a plain release string, else None."""
    m = _RELEASE.fullmatch(text or "")
    if not m:
        return None
    parts = tuple(int(p) for p in m.group(1).split("."))
    return parts + (0,) * (3 - len(parts))


def parse(software: str | None) -> Software | None:
    """"name/version" as fetchtool gives it -> Software; None when absent or not of that form."""
    if not software or "/" not in software:
        return None
    name, _, version = software.partition("/")
    if not name:
        return None
    family = NAMES.get(name) or (LIBRDKAFKA if RDKAFKA_SUFFIX in version else UNKNOWN)
    own = version.rsplit(RDKAFKA_SUFFIX, 1)[1] if family == LIBRDKAFKA and RDKAFKA_SUFFIX in version else version
    return Software(family, name, version, release(own))


def fmt(version: Version) -> str:
    return ".".join(str(p) for p in version)


# -- KIP-227 support ------------------------------------------------------------------------------------------
YES, NO = "yes", "no"  # and UNKNOWN


@dataclass(frozen=True, slots=True)
class Support:
    answer: str  # YES | NO | UNKNOWN
    note: str
    source: str


@dataclass(frozen=True, slots=True)
class _Row:
    family: str
    since: Version | None  # first release the answer holds for; None: every earlier one
    until: Version | None  # first release it no longer holds for; None: to date
    answer: str
    note: str
    source: str


_JAVA_SRC = ("https://github.com/apache/kafka/blob/1.1.0/clients/src/main/java/org/apache/kafka/clients/"
             "FetchSessionHandler.java")
_KP_SRC = ("https://github.com/dpkp/kafka-python/blob/master/CHANGES.md "
           "(2.1.0: Implement Incremental Fetch Sessions / KIP-227 (#2508))")
_PF_SRC = ("https://github.com/platformatic/kafka/issues/315, fixed by https://github.com/platformatic/kafka/pull/316 "
           "(v2.3.0)")

SUPPORT: tuple[_Row, ...] = (
    _Row(JAVA, None, (1, 1, 0), NO, "no FetchSessionHandler before 1.1.0", _JAVA_SRC + " (absent at 1.0.0)"),
    _Row(JAVA, (1, 1, 0), None, YES, "KIP-227 since 1.1.0 (KAFKA-6254), consumers and follower fetchers", _JAVA_SRC),
    _Row(LIBRDKAFKA, None, None, NO, "every Fetch v7+ carries session id 0, epoch -1 (sessionless); bindings too",
         "https://github.com/confluentinc/librdkafka/blob/master/INTRODUCTION.md (KIP-227: Not supported); "
         "src/rdkafka_fetcher.c"),
    _Row(KAFKA_PYTHON, None, (2, 1, 0), NO, "no fetch sessions before 2.1.0", _KP_SRC),
    _Row(KAFKA_PYTHON, (2, 1, 0), None, YES, "on by default; enable_incremental_fetch_sessions=False turns them off",
         _KP_SRC),
    _Row(SARAMA, None, None, NO, "Fetch v7+ carries (0, -1) since 1.26.2; 1.26.0-1.26.1 sent (0, 0) on every fetch "
         "and never reused the session", "https://github.com/IBM/sarama/blob/main/consumer.go; "
         "https://github.com/IBM/sarama/pull/1644"),
    _Row(FRANZ_GO, None, None, YES, "on by default in every release (commit cd67427d, v0.1.0); "
         "kgo.DisableFetchSessions() (v1.2.4+) turns them off",
         "https://github.com/twmb/franz-go/blob/master/pkg/kgo/config.go (DisableFetchSessions); CHANGELOG.md v1.2.4"),
    _Row(PLATFORMATIC, None, (2, 3, 0), NO, "sends (0, 0) on every fetch and never reuses the session (churn)",
         _PF_SRC),
    _Row(PLATFORMATIC, (2, 3, 0), None, YES, "reuses sessions since 2.3.0; forgets removed partitions since 2.3.1 "
         "(PR #321)", _PF_SRC),
    _Row(AIOKAFKA, None, None, NO, "FetchRequest carries session id 0, epoch -1",
         "https://github.com/aio-libs/aiokafka/blob/master/aiokafka/protocol/fetch.py (FetchRequest.build)"),
    _Row(KAFKAJS, None, None, NO, "fetch requests default to sessionId 0, sessionEpoch -1 and nothing sets them",
         "https://github.com/tulios/kafkajs/blob/master/src/protocol/requests/fetch/index.js"),
    _Row(KAFKA_GO, None, None, NO, "fetch v10 carries session id 0, epoch -1",
         "https://github.com/segmentio/kafka-go/blob/main/write.go (writeFetchRequestV10)"),
)  # fmt: skip

# The first release of a family that names itself (KIP-511): a capture that shows the name shows one of these.
SENDS_SOFTWARE_SINCE: dict[str, Version] = {
    JAVA: (2, 4, 0),  # apache/kafka f98013cc (KIP-511), first in 2.4.0
    KAFKA_PYTHON: (2, 1, 3),  # dpkp/kafka-python 4995e9b9 (#2558), first in 2.1.3
    SARAMA: (1, 30, 0),  # IBM/sarama 4a17d919, first in v1.30.0
}


def _overlaps(row: _Row, low: Version | None, high: Version | None) -> bool:
    """Does [row.since, row.until) meet [low, high]?"""
    return (row.until is None or low is None or low < row.until) and (row.since is None or high is None
                                                                     or row.since <= high)  # fmt: skip


def sessions_support(sw: Software) -> Support:
    """Does this client, at this version, implement KIP-227 fetch sessions?"""
    return _lookup(SUPPORT, sw)


# -- what a client does once a broker refuses it a session (session id 0 to its (0, 0) fetch) ------------------
ASKS_AGAIN, GIVES_UP = "asks_again", "gives_up"  # (and UNKNOWN)

AFTER_REFUSAL: tuple[_Row, ...] = (
    _Row(JAVA, (1, 1, 0), None, ASKS_AGAIN, "asks again with a full (0, 0) fetch every time: a full response with "
         "session id 0 sets FetchSessionHandler's next request back to INITIAL",
         _JAVA_SRC.replace("1.1.0", "4.3.1") + " (handleResponse)"),
    _Row(KAFKA_PYTHON, (2, 1, 0), None, ASKS_AGAIN, "asks again with a full (0, 0) fetch every time, as Java's "
         "FetchSessionHandler does", "https://github.com/dpkp/kafka-python/blob/master/kafka/consumer/fetcher.py "
         "(FetchSessionHandler.handle_response)"),
    _Row(FRANZ_GO, None, (1, 4, 2), UNKNOWN, "before v1.4.2 franz-go took session id 0 for a session (its "
         "CHANGELOG)", "https://github.com/twmb/franz-go/blob/master/CHANGELOG.md (v1.4.2)"),
    # Seen in captures/kafka/franz-refused.pcap (franz-go v1.22.3 against Kafka 4.3.1).
    _Row(FRANZ_GO, (1, 4, 2), None, GIVES_UP, "franz-go stops asking that broker for a session after one refusal "
         "and fetches without one until the client restarts: (0, -1), or (its last session id, -1), which Kafka "
         "answers as a sessionless fetch", "https://github.com/twmb/franz-go/blob/master/CHANGELOG.md (v1.4.2); "
         "pkg/kgo/source.go (fetchSession.kill)"),
)  # fmt: skip


def after_refusal(sw: Software) -> Support:
    """What this client, at this version, does after a broker refused it a session."""
    return _lookup(AFTER_REFUSAL, sw)


def _lookup(table: tuple[_Row, ...], sw: Software) -> Support:
    """The answer of `table` for this client at this version (UNKNOWN where the rows that may apply disagree)."""
    rows = [r for r in table if r.family == sw.family]
    if not rows:
        return Support(UNKNOWN, f"client software {sw.name!r} is not one fetchtool knows", "")
    if sw.release is not None:
        rows = [r for r in rows if _overlaps(r, sw.release, sw.release)]
    else:  # any release that names itself this way
        rows = [r for r in rows if _overlaps(r, SENDS_SOFTWARE_SINCE.get(sw.family), None)]
    if not rows:
        return Support(UNKNOWN, f"not known for {sw.name} {sw.version}", "")
    if len({r.answer for r in rows}) != 1:
        return Support(UNKNOWN, f"depends on the version, and {sw.version!r} is not a comparable release",
                       "; ".join(dict.fromkeys(r.source for r in rows)))  # fmt: skip
    return Support(rows[0].answer, rows[0].note, rows[0].source)
