"""Published bugs that produce the patterns fetchtool reports, and which of them a finding matches.

Each row was read at its source (the fix commit, the changelog, the issue); the affected range is
[affected_from, fixed_in). A row matches a finding only when the finding's code (and cause) is one the bug
produces AND the software's family and release fall in that range:

* client rows match the client software the capture shows (Exchange.client_software, "name/version");
* broker rows match only a broker version passed explicitly: a capture does not say which broker it saw.

A version that is not a plain release (client_software.release is None) never matches a version-bounded
row, nor does unknown software. Some clients in the table never name themselves in a capture (the Java client
before 2.4.0, Sarama before 1.30.0): their rows match only when the caller passes the software it knows.
"""

from __future__ import annotations

from dataclasses import dataclass

from fetchtool.analysis.diagnosis.client_software import JAVA, PLATFORMATIC, SARAMA, Version, fmt, parse, release

BROKER = "apache-kafka-broker"

# fetchtool's finding codes and causes (advice.SEVERITY, causes.py)
NOT_FOUND = "FETCH_SESSION_ID_NOT_FOUND"
BAD_EPOCH = "INVALID_FETCH_SESSION_EPOCH"


@dataclass(frozen=True, slots=True)
class KnownBug:
    id: str  # JIRA key or "owner/repo#N"
    url: str
    family: str  # client_software family, or BROKER
    affected_from: Version | None  # first affected release; None: every release before fixed_in
    fixed_in: Version | None  # first fixed release; None: unfixed
    patterns: tuple[tuple[str, str | None], ...]  # (code, cause); cause None: the code has no cause
    summary: str  # one sentence a support engineer understands
    source: str  # where the range and the behaviour were verified
    condition: str = ""  # what must also hold that a capture cannot show

    def produces(self, code: str, cause: str | None) -> bool:
        return (code, cause) in self.patterns

    def affects(self, version: Version | None) -> bool:
        if version is None:
            return False
        return (self.affected_from is None or self.affected_from <= version) and (
            self.fixed_in is None or version < self.fixed_in)  # fmt: skip

    def sentence(self) -> str:
        """What a finding says when it matches this bug."""
        fixed = f"fixed in {fmt(self.fixed_in)}" if self.fixed_in else "unfixed"
        cond = f" (only {self.condition})" if self.condition else ""
        return f"matches known bug {self.id} ({self.url}), {fixed}{cond}: {self.summary}"


CHURN = (("SESSION_CHURN", None), ("CACHE_FULL", None), ("EVICTION_PRESSURE", None))

KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug(
        id="platformatic/kafka#315", url="https://github.com/platformatic/kafka/issues/315", family=PLATFORMATIC,
        affected_from=None, fixed_in=(2, 3, 0), patterns=CHURN,
        summary="@platformatic/kafka sends session (0, 0) on every fetch and ignores the session the broker "
                "creates, so each fetch fills a cache slot with a session nobody uses; upgrade to 2.3.0 or later.",
        # fix: PR #316 (commit a09d0be) first released in v2.3.0; v0.1.0 already sent (0, 0) (consumer.ts)
        source="https://github.com/platformatic/kafka/pull/316 (commit a09d0be, first in v2.3.0)",
    ),
    KnownBug(
        id="IBM/sarama#1644", url="https://github.com/IBM/sarama/pull/1644", family=SARAMA,
        affected_from=(1, 26, 0), fixed_in=(1, 26, 2), patterns=CHURN,
        summary="Sarama 1.26.0-1.26.1 sent Fetch v10 with session (0, 0) and ignored the session created, so "
                "every fetch took a cache slot; 1.26.2 sends (0, -1), which creates none (1.26.4 is the first "
                "release of that line marked stable).",
        # bug: commit 37faed7f (v1.26.0) raised Fetch to v10 without session fields; fix: commit b9b3d095
        source="https://github.com/IBM/sarama/blob/main/CHANGELOG.md (1.26.2: #1644); commits 37faed7f, b9b3d095; "
               "reported on v1.26.0 in https://github.com/IBM/sarama/issues/1704",
        condition="with Config.Version >= V2_1_0_0; Sarama names itself to brokers only since 1.30.0",
    ),
    KnownBug(
        id="KAFKA-9137", url="https://issues.apache.org/jira/browse/KAFKA-9137", family=BROKER,
        affected_from=(1, 1, 0), fixed_in=(2, 5, 0),
        patterns=((NOT_FOUND, "evicted"), (NOT_FOUND, "unknown"), ("EVICTION_PRESSURE", None)),
        summary="Brokers before 2.5.0 kept a session's last-used time at its creation, not its last fetch, so "
                "120 s after creation a session in active use could be evicted as stale by any newcomer to a "
                "full cache (FETCH_SESSION_ID_NOT_FOUND for its client); upgrade the brokers.",
        source="https://github.com/apache/kafka/pull/7640 (commit a4cbdc6, first in 2.5.0, not in 2.4.x)",
    ),
    KnownBug(
        id="KAFKA-12330", url="https://issues.apache.org/jira/browse/KAFKA-12330", family=BROKER,
        affected_from=(1, 1, 0), fixed_in=(3, 0, 0), patterns=(("PARTITION_STARVATION", None),),
        summary="Brokers before 3.0.0 moved every partition that appeared in an incremental response to the back "
                "of the session's order, even with only a high-watermark update and no records, so when "
                "responses filled up to max bytes some partitions with data were left out again and again; "
                "upgrade the brokers.",
        source="https://github.com/apache/kafka/pull/10318 (commit d80a87f, first in 3.0.0, not in 2.8.x)",
    ),
    KnownBug(
        id="KAFKA-8052", url="https://issues.apache.org/jira/browse/KAFKA-8052", family=JAVA,
        affected_from=(1, 1, 0), fixed_in=(2, 3, 0), patterns=((BAD_EPOCH, "duplicate_request"),),
        summary="Java consumers before 2.3.0 could send the next fetch with the epoch of the previous one when "
                "its response had arrived but was not yet processed (heartbeat thread), so the broker answered "
                "INVALID_FETCH_SESSION_EPOCH; upgrade the client.",
        source="https://github.com/apache/kafka/pull/6582 (commit 4b04f55 on 2.3, first in 2.3.0)",
        condition="consumers; Java clients name themselves to brokers only since 2.4.0",
    ),
    KnownBug(
        id="KAFKA-17182", url="https://issues.apache.org/jira/browse/KAFKA-17182", family=JAVA,
        affected_from=(3, 7, 0), fixed_in=(4, 0, 0), patterns=((NOT_FOUND, "evicted"),),
        summary="The KIP-848 consumer (AsyncKafkaConsumer) before 4.0.0 left partitions with buffered records "
                "out of its fetches, which removed them from its session; the smaller session was then evicted "
                "by larger ones; upgrade the client to 4.0.0 or later.",
        # kafka-clients sources: AbstractFetch.bufferedNodes present in 4.0.0, absent in 3.9.1
        source="https://github.com/apache/kafka/pull/18795 (AbstractFetch.bufferedNodes in 4.0.0, not in 3.9.1)",
        condition="consumers with group.protocol=consumer",
    ),
)  # fmt: skip


def match(code: str, cause: str | None, software: str | None = None,
          broker_version: str | None = None) -> tuple[KnownBug, ...]:  # fmt: skip
    """The known bugs a finding (code, cause) of this client software, or of this broker version, matches."""
    sw = parse(software)
    broker = release(broker_version)
    out = []
    for bug in KNOWN_BUGS:
        if not bug.produces(code, cause):
            continue
        if bug.family == BROKER:
            hit = bug.affects(broker)
        else:
            hit = sw is not None and sw.family == bug.family and bug.affects(sw.release)
        if hit:
            out.append(bug)
    return tuple(out)
