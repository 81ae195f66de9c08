"""The partition error table fetchtool explains codes with (fetchtool.analysis.diagnosis.partition_codes) names
each code as Apache Kafka 4.3.1's own org.apache.kafka.common.protocol.Errors does, read from Kafka's jars."""

from __future__ import annotations

import subprocess

import pytest

import kafka_peer
from fetchtool.analysis.diagnosis.partition_codes import CODES

pytestmark = pytest.mark.kafka

LIST_ERRORS = """
import org.apache.kafka.common.protocol.Errors;
public class ListErrors {
    public static void main(String[] args) {
        for (Errors e : Errors.values()) System.out.println(e.code() + " " + e.name());
    }
}
"""


def test_every_partition_code_has_kafkas_number_and_name(tmp_path):
    kafka_peer.check_installed()
    source = tmp_path / "ListErrors.java"
    source.write_text(LIST_ERRORS)
    out = subprocess.run([kafka_peer.java(), "-cp", kafka_peer.classpath(), str(source)], capture_output=True,
                         text=True, check=True, timeout=120).stdout  # fmt: skip
    kafka = {int(code): name for code, name in (line.split() for line in out.splitlines() if line.strip())}
    assert kafka[74] == "FENCED_LEADER_EPOCH"  # the listing is Kafka's enum
    assert {c: p.name for c, p in CODES.items()} == {c: kafka[c] for c in CODES}
