"""Client software from real captures, KIP-227 support, and the known-bug table a finding is matched against.

The versions used here are the ones verified at each bug's source (see the rows' `source`): inside a range a
finding matches, at the fixed release and before the first affected one it does not, and software fetchtool
cannot place (unknown name, Confluent Platform numbering, "dev") never matches a version-bounded row.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fetchtool.analysis.diagnosis import client_software as cs
from fetchtool.analysis.diagnosis.advice import ADVICE, SEVERITY
from fetchtool.analysis.diagnosis.known_bugs import BROKER, KNOWN_BUGS, KnownBug, match
from fetchtool.decoder import decode_capture

CAPTURES = Path(__file__).resolve().parents[2] / "captures"

# Every client_software the repo's captures carry -> (family, release).
REAL = {
    "apache-kafka-java/4.3.1": (cs.JAVA, (4, 3, 1)),
    "confluent-kafka-python/2.16.1-rdkafka-2.16.0": (cs.LIBRDKAFKA, (2, 16, 0)),  # librdkafka's own release
    "kafka-python/3.0.12": (cs.KAFKA_PYTHON, (3, 0, 12)),
    "platformatic-kafka/2.2.3": (cs.PLATFORMATIC, (2, 2, 3)),
    "platformatic-kafka/2.12.1": (cs.PLATFORMATIC, (2, 12, 1)),  # captures/noida/platformatic-noida.pcap
    "kgo/v1.22.3": (cs.FRANZ_GO, (1, 22, 3)),  # captures/kafka/franz-refused.pcap
}


def _capture_software() -> set[str]:
    seen: set[str] = set()
    for path in sorted(p for p in CAPTURES.rglob("*") if p.suffix in (".pcap", ".pcapng")):
        run = decode_capture([path])
        for _ in run:
            pass
        seen |= set(run.report.client_software.values())
    return seen


# -- client software -----------------------------------------------------------------------------------------
def test_the_captures_carry_exactly_the_known_real_strings():
    # A new capture with a new client must be added to REAL (and to client_software.NAMES if new).
    assert _capture_software() == set(REAL)


@pytest.mark.parametrize("text", sorted(REAL))
def test_real_client_software_parses_to_its_family(text):
    sw = cs.parse(text)
    assert (sw.family, sw.release) == REAL[text]
    assert f"{sw.name}/{sw.version}" == text


@pytest.mark.parametrize(("text", "family", "release"), [
    ("confluent-kafka-go/2.16.0", cs.LIBRDKAFKA, (2, 16, 0)),  # sends librdkafka's version
    ("confluent-kafka-dotnet/2.15.0", cs.LIBRDKAFKA, (2, 15, 0)),
    ("librdkafka/2.15.0", cs.LIBRDKAFKA, (2, 15, 0)),
    ("myapp/1.2-rdkafka-2.4.0", cs.LIBRDKAFKA, (2, 4, 0)),
    ("sarama/v1.45.0", cs.SARAMA, (1, 45, 0)),
    ("sarama/dev", cs.SARAMA, None),
    ("kgo/v1.18.1", cs.FRANZ_GO, (1, 18, 1)),
    ("kgo/unknown", cs.FRANZ_GO, None),
    ("apache-kafka-java/7.6.0-ccs", cs.JAVA, None),  # Confluent Platform numbering, not Apache's
    ("apache-kafka-java/4.1.0-SNAPSHOT", cs.JAVA, None),
    ("apache-kafka-java/unknown", cs.JAVA, None),  # AppInfoParser's fallback
    ("librdkafka/2.15.0-RC1", cs.LIBRDKAFKA, None),
    ("karafka/2.4.0", cs.UNKNOWN, (2, 4, 0)),
])  # fmt: skip
def test_software_families_and_releases(text, family, release):
    sw = cs.parse(text)
    assert (sw.family, sw.release) == (family, release)


@pytest.mark.parametrize("text", [None, "", "apache-kafka-java", "/4.3.1"])
def test_absent_or_malformed_software_is_none(text):
    assert cs.parse(text) is None


def test_short_releases_compare_as_three_parts():
    assert cs.release("2.3") == (2, 3, 0) < cs.release("2.3.1")


# -- KIP-227 support -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "answer"), [
    ("apache-kafka-java/4.3.1", cs.YES),
    ("confluent-kafka-python/2.16.1-rdkafka-2.16.0", cs.NO),
    ("kafka-python/3.0.12", cs.YES),
    ("platformatic-kafka/2.2.3", cs.NO),
    ("platformatic-kafka/2.3.0", cs.YES),
    ("platformatic-kafka/2.12.1", cs.YES),
    ("platformatic-kafka/2.3.0-alpha.1", cs.UNKNOWN),  # the answer changes with the version
    ("apache-kafka-java/1.0.0", cs.NO),
    ("apache-kafka-java/1.1.0", cs.YES),
    ("apache-kafka-java/7.6.0-ccs", cs.YES),  # any Java client that names itself is 2.4.0+
    ("kafka-python/2.0.2", cs.NO),
    ("kafka-python/2.1.0", cs.YES),
    ("kafka-python/2.2.0.dev", cs.YES),  # names itself only since 2.1.3
    ("sarama/v1.45.0", cs.NO),
    ("sarama/dev", cs.NO),
    ("kgo/unknown", cs.YES),
    ("confluent-kafka-go/2.16.0", cs.NO),
    ("karafka/2.4.0", cs.UNKNOWN),
])  # fmt: skip
def test_sessions_support(text, answer):
    assert cs.sessions_support(cs.parse(text)).answer == answer


@pytest.mark.parametrize("family", [cs.AIOKAFKA, cs.KAFKAJS, cs.KAFKA_GO])
def test_clients_that_never_name_themselves_have_no_sessions(family):
    assert cs.sessions_support(cs.Software(family, family, "1.0.0", (1, 0, 0))).answer == cs.NO


def test_every_support_row_has_a_source_and_every_known_name_a_row():
    assert all(r.source.startswith("https://") and r.note for r in cs.SUPPORT)
    assert set(cs.NAMES.values()) <= {r.family for r in cs.SUPPORT}


# -- once refused a session ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "answer"), [
    ("kgo/v1.22.3", cs.GIVES_UP),  # seen in captures/kafka/franz-refused.pcap
    ("kgo/v1.4.2", cs.GIVES_UP),
    ("kgo/v1.4.1", cs.UNKNOWN),  # took session id 0 for a session (its CHANGELOG): not "gives up"
    ("kgo/unknown", cs.UNKNOWN),  # may be older than v1.4.2
    ("apache-kafka-java/4.3.1", cs.ASKS_AGAIN),
    ("kafka-python/3.0.12", cs.ASKS_AGAIN),
    ("platformatic-kafka/2.12.1", cs.UNKNOWN),
    ("karafka/2.4.0", cs.UNKNOWN),
])  # fmt: skip
def test_what_a_client_does_once_refused_a_session(text, answer):
    assert cs.after_refusal(cs.parse(text)).answer == answer


def test_every_after_refusal_row_has_a_source():
    assert all(r.source.startswith("https://") and r.note for r in cs.AFTER_REFUSAL)


# -- known bugs: the table ------------------------------------------------------------------------------------
FAMILIES = set(cs.NAMES.values()) | {BROKER}


@pytest.mark.parametrize("bug", KNOWN_BUGS, ids=lambda b: b.id)
def test_every_row_is_complete(bug):
    assert bug.id and bug.url.startswith("https://") and bug.id.split("#")[-1].split("-")[-1] in bug.url
    assert bug.family in FAMILIES
    assert bug.fixed_in is None or isinstance(bug.fixed_in, tuple)
    if bug.affected_from and bug.fixed_in:
        assert bug.affected_from < bug.fixed_in
    assert bug.patterns and bug.source.startswith("https://")
    assert bug.summary.endswith(".") and ". " not in bug.summary  # one sentence
    for code, cause in bug.patterns:
        assert code in SEVERITY
        assert (code, cause) in ADVICE  # a (code, cause) fetchtool reports and advises on


def test_ids_are_unique():
    assert len({b.id for b in KNOWN_BUGS}) == len(KNOWN_BUGS)


# -- known bugs: matching -------------------------------------------------------------------------------------
NF, EP = "FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH"

CLIENT_CASES = [  # (bug, code, cause, software, matches)
    ("platformatic/kafka#315", "SESSION_CHURN", None, "platformatic-kafka/2.2.3", True),  # platformatic-churn.pcap
    ("platformatic/kafka#315", "CACHE_FULL", None, "platformatic-kafka/0.1.0", True),
    ("platformatic/kafka#315", "SESSION_CHURN", None, "platformatic-kafka/2.3.0", False),
    ("platformatic/kafka#315", "SESSION_CHURN", None, "platformatic-kafka/2.12.1", False),
    ("IBM/sarama#1644", "SESSION_CHURN", None, "sarama/v1.26.0", True),
    ("IBM/sarama#1644", "EVICTION_PRESSURE", None, "sarama/v1.26.1", True),
    ("IBM/sarama#1644", "SESSION_CHURN", None, "sarama/v1.25.0", False),
    ("IBM/sarama#1644", "SESSION_CHURN", None, "sarama/v1.26.2", False),
    ("KAFKA-8052", EP, "duplicate_request", "apache-kafka-java/2.2.1", True),
    ("KAFKA-8052", EP, "duplicate_request", "apache-kafka-java/1.1.0", True),
    ("KAFKA-8052", EP, "duplicate_request", "apache-kafka-java/2.3.0", False),
    ("KAFKA-8052", EP, "duplicate_request", "apache-kafka-java/1.0.2", False),
    ("KAFKA-8052", EP, "concurrent_requests", "apache-kafka-java/2.2.1", False),  # not what it does on the wire
    ("KAFKA-17182", NF, "evicted", "apache-kafka-java/3.7.0", True),
    ("KAFKA-17182", NF, "evicted", "apache-kafka-java/3.9.1", True),
    ("KAFKA-17182", NF, "evicted", "apache-kafka-java/3.6.2", False),
    ("KAFKA-17182", NF, "evicted", "apache-kafka-java/4.0.0", False),
    ("KAFKA-17182", NF, "broker_restart", "apache-kafka-java/3.9.1", False),
]

BROKER_CASES = [  # (bug, code, cause, broker version, matches)
    ("KAFKA-9137", NF, "unknown", "2.4.1", True),
    ("KAFKA-9137", NF, "evicted", "1.1.0", True),
    ("KAFKA-9137", NF, "evicted", "2.5.0", False),
    ("KAFKA-9137", NF, "evicted", "1.0.2", False),
    ("KAFKA-9137", NF, "closed_by_client", "2.4.1", False),
    ("KAFKA-12330", "PARTITION_STARVATION", None, "2.8.2", True),
    ("KAFKA-12330", "PARTITION_STARVATION", None, "3.0.0", False),
    ("KAFKA-12330", "PARTITION_STARVATION", None, "4.3.1", False),
]


def _ids(found: tuple[KnownBug, ...]) -> set[str]:
    return {b.id for b in found}


@pytest.mark.parametrize(("bug", "code", "cause", "software", "hit"), CLIENT_CASES)
def test_client_rows_match_inside_their_range_only(bug, code, cause, software, hit):
    assert (bug in _ids(match(code, cause, software))) is hit


@pytest.mark.parametrize(("bug", "code", "cause", "broker", "hit"), BROKER_CASES)
def test_broker_rows_match_an_explicit_broker_version_only(bug, code, cause, broker, hit):
    assert (bug in _ids(match(code, cause, broker_version=broker))) is hit
    assert bug not in _ids(match(code, cause, software=f"apache-kafka-java/{broker}"))  # a client is no broker
    assert bug not in _ids(match(code, cause))


def test_client_rows_are_not_matched_by_a_broker_version():
    assert match(EP, "duplicate_request", broker_version="2.2.0") == ()


@pytest.mark.parametrize("software", [None, "karafka/2.2.0", "apache-kafka-java/2.2.0-ccs", "sarama/dev",
                                      "platformatic-kafka/2.2.3-beta", "garbage"])
@pytest.mark.parametrize("bug", KNOWN_BUGS, ids=lambda b: b.id)
def test_unknown_or_unplaceable_software_never_matches(bug, software):
    for code, cause in bug.patterns:
        assert bug.id not in _ids(match(code, cause, software, broker_version="not-a-version"))


def test_current_java_client_matches_nothing():
    for code, cause in ADVICE:
        assert match(code, cause, "apache-kafka-java/4.3.1") == ()


def test_sentence_names_the_bug_its_url_and_fix():
    (bug,) = match("SESSION_CHURN", None, "platformatic-kafka/2.2.3")
    assert bug.sentence().startswith(
        "matches known bug platformatic/kafka#315 (https://github.com/platformatic/kafka/issues/315), fixed in 2.3.0")
    unfixed = KnownBug("X-1", "https://example.invalid/X-1", BROKER, None, None, (("CACHE_FULL", None),), "s.", "")
    assert "), unfixed" in unfixed.sentence()
    assert unfixed.affects((99, 0, 0)) and not unfixed.affects(None)
