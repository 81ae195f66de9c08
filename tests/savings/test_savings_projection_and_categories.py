"""The 10x/100x projection and where every saved byte is booked.

Projection: "the same workload at 10x and 100x the partitions with the same change rate": the number of partitions
that change per fetch stays the same, while full fetches carry every partition. So a client whose traffic already
is its incremental equivalent saves nothing at any factor, however many full fetches (session creations) it
made; a sessionless client's saving grows with the factor.

Categories: potential (sessionless), lost (failing sessions) and excess (working sessions that carry more than
their incremental equivalent, e.g. resending unchanged partitions) add up to saved_bytes exactly, by construction
(savings.Tally books each exchange's saving in one of them); the tests check what lands where.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fetchtool.analysis.reports import savings_panel
from fetchtool.analysis.savings.estimator import estimate
from fetchtool.decoder import decode_capture
from same_data_consumers import write_capture

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
FACTORS = ("10x", "100x")


def _savings(*paths) -> dict:
    return estimate(decode_capture([str(p) for p in paths])).to_json()


def _by_client(s: dict) -> dict:
    return {c["client_id"]: c for c in s["per_client"]}


def _groups(s: dict) -> list[dict]:
    return [s["total"], *s["per_client"], *s["per_broker"]]


def _triplets(path, version=12, rounds=10):
    """'java' uses a session as Kafka's client does, 'plain' never uses one (epoch -1), and 'resend' keeps a
    working session but lists every partition in every incremental request, changed or not."""
    write_capture(path, "java-a", "nosess", "resend", version=version, rounds=rounds)


@pytest.mark.parametrize("name", ["scenarios/healthy.pcap", "scenarios-real/kafka-python-sessions.pcap",
                                  "scenarios/topic-id-switch.pcap", "scenarios/concurrent-fetch.pcap",
                                  "scenarios/midstream.pcap", "scenarios/epoch-wrap-ok.pcap"])
def test_working_sessions_project_no_saving_at_any_factor(name):
    """Every client there works with sessions (actual == incremental equivalent): their session-creating full
    fetches grow with the partition count, on both sides alike; sessions that began before the capture have
    none, and nothing grows."""
    s = _savings(CAPTURES / name)
    assert s["total"]["saved_bytes"] == 0
    for group in _groups(s):
        assert group["actual_bytes"] == group["incremental_bytes"]
        for k in FACTORS:
            p = group["projection"][k]
            assert p["saved_bytes"] == 0 and p["actual_bytes"] == p["incremental_bytes"], (name, k, p)
            assert p["saved_bytes_per_hour"] in (0, None)
    p100 = s["total"]["projection"]["100x"]
    if s["total"]["requests"].get("full"):   # the full fetches still grow: not just the capture again
        assert p100["actual_bytes"] > s["total"]["actual_bytes"] and p100["full_bytes"] > p100["actual_bytes"]
    else:
        assert p100["actual_bytes"] == s["total"]["actual_bytes"] < p100["full_bytes"]


def test_eviction_thrash_projects_only_the_evicted_clients_loss():
    s = _by_client(_savings(CAPTURES / "scenarios/eviction-thrash.pcap"))
    for client, c in s.items():
        for k in FACTORS:
            if c["actual_bytes"] == c["incremental_bytes"]:   # big-d and the others whose session kept working
                assert c["projection"][k]["saved_bytes"] == 0, (client, k)
    victim = s["svc-c"]
    assert victim["lost_bytes"] == victim["saved_bytes"] > 0
    assert 0 < victim["saved_bytes"] < victim["projection"]["10x"]["saved_bytes"] < \
        victim["projection"]["100x"]["saved_bytes"]


def test_sessionless_twin_projects_exactly_what_its_session_twin_does(tmp_path):
    """By construction, at any factor: the sessionless client with a session = the session client, and the
    session client without one = the sessionless client. So the sessionless client's projected incremental bytes
    are the session client's projected actual bytes (its one session-creating full fetch grows too)."""
    for version in (12, 13):
        path = tmp_path / f"triplets-v{version}.pcap"
        _triplets(path, version)
        c = _by_client(_savings(path))
        a, b = c["java-a"], c["nosess"]
        assert b["incremental_bytes"] == a["actual_bytes"] and b["actual_bytes"] == a["full_bytes"]
        for k in FACTORS:
            pa, pb = a["projection"][k], b["projection"][k]
            assert pa["saved_bytes"] == 0
            assert pb["incremental_bytes"] == pa["actual_bytes"] > a["actual_bytes"]
            assert pb["actual_bytes"] == pa["full_bytes"]
            assert pb["saved_bytes"] == pb["actual_bytes"] - pb["incremental_bytes"]
        # the sessionless client's saving grows with the partition count: 9 and 99 more of the same per fetch
        # beyond the first
        grow10 = b["projection"]["10x"]["saved_bytes"] - b["saved_bytes"]
        grow100 = b["projection"]["100x"]["saved_bytes"] - b["saved_bytes"]
        assert b["saved_bytes"] > 0 and grow10 > 0 and grow100 == 11 * grow10


def test_resent_unchanged_partitions_are_booked_as_excess(tmp_path):
    """The resending client's session works, so nothing is lost; what it sends beyond its incremental equivalent
    is exactly its request bytes beyond the Java-like client's (same partitions, offsets, data, id length)."""
    path = tmp_path / "triplets.pcap"
    _triplets(path)
    s = _savings(path)
    c = _by_client(s)
    a, r = c["java-a"], c["resend"]
    assert r["requests"] == {"full": 1, "incremental": 9}
    assert r["incremental_request_bytes"] == a["actual_request_bytes"]
    assert r["actual_response_bytes"] == r["incremental_response_bytes"] == a["actual_response_bytes"]
    assert r["excess_request_bytes"] == r["actual_request_bytes"] - a["actual_request_bytes"] > 0
    assert r["excess_response_bytes"] == 0
    assert r["saved_bytes"] == r["excess_bytes"] == r["excess_request_bytes"]
    assert r["potential_bytes"] == r["lost_bytes"] == 0
    assert a["excess_bytes"] == 0


def test_the_reports_name_the_excess(tmp_path):
    """Terminal and Markdown say where the resending client's saving comes from; a capture without any says
    nothing about it."""
    import json

    from typer.testing import CliRunner

    from fetchtool.cli import app

    path = tmp_path / "triplets.pcap"
    _triplets(path)
    runner = CliRunner()
    s = json.loads(runner.invoke(app, ["savings", str(path), "--format", "json"]).output)
    human_excess = savings_panel.human(s["total"]["excess_request_bytes"])
    out = runner.invoke(app, ["savings", str(path)], env={"COLUMNS": "200"}).output
    assert "unchanged partitions resent" in out and human_excess in out
    md = runner.invoke(app, ["analyze", str(path), "--format", "markdown"]).output
    assert "unchanged partitions resent" in md and "| excess |" in md
    savings_section = md[md.index("## Savings"):]
    row = next(line for line in savings_section.splitlines() if line.startswith("| resend@"))
    assert row.rstrip(" |").rsplit("| ", 1)[1] == f"{_by_client(s)['resend']['excess_bytes']:,}"
    healthy = runner.invoke(app, ["savings", str(CAPTURES / "scenarios/healthy.pcap")], env={"COLUMNS": "200"})
    assert "unchanged partitions" not in healthy.output
