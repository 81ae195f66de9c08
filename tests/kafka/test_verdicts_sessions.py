"""fetchtool's verdicts on every real Kafka 4.3.1 capture of captures/kafka/, held to the broker's own record.

For each capture the expectation comes from Kafka's logs recorded beside it (tests/kafka/broker_record.py), never
from fetchtool: the sessions the cache created (FetchSessionCacheShard), who they were given to (the request log's
connection of the full fetch that got the id), how many partitions each epoch added and removed (FetchManager's
incremental contexts), how they ended (closed by a full request, evicted, or lost with their broker), and every
session error the broker answered.

fetchtool is run as a support engineer runs it: `fetchtool analyze CAPTURE --format json` for the contract, and
the same analysis's epoch steps (what `fetchtool sessions` prints) for per-epoch partition counts.

Where today's analysis disagrees with Kafka's record the test is marked xfail(strict=True) with both sides in the
reason (KNOWN_DISAGREEMENTS below), so it fails loudly the day the analysis is fixed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

import broker_record as br

ROOT = Path(__file__).resolve().parents[2]
KAFKA_CAPTURES = ROOT / "captures" / "kafka"
BOUNDARY_S = 0.01  # a request logged this close to the capture's first or last packet may be on either side

# (test name, capture name) -> what fetchtool says vs what Kafka's log says.
KNOWN_DISAGREEMENTS: dict[tuple[str, str], str] = {
}


def captures() -> list[Path]:
    if not KAFKA_CAPTURES.is_dir():
        return []
    return sorted(p for p in KAFKA_CAPTURES.iterdir() if p.name.endswith((".pcap", ".pcapng", ".pcap.gz"))
                  and (KAFKA_CAPTURES / (p.name.split(".pcap")[0] + ".record.json")).exists())


def per_capture(test_name: str):
    caps = captures()
    if not caps:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no captures/kafka/*.pcap committed yet"))]
    params = []
    for c in caps:
        name = c.name.split(".pcap")[0]
        reason = KNOWN_DISAGREEMENTS.get((test_name, name))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(c, id=name, marks=marks))
    return params


# ---------------------------------------------------------------------------------------------------------------
# Both sides, once per capture


@lru_cache(maxsize=None)
def run_of(capture: Path) -> br.RecordedRun:
    return br.load_run(capture)


@lru_cache(maxsize=None)
def analyze_json(capture: Path, cache_slots: int | None = None, cache_shards: int | None = None) -> dict:
    """`fetchtool analyze --format json`, by default inferring the cache (as run on a capture alone), or told the
    broker's max.incremental.fetch.session.cache.slots and shard count (as from record.json)."""
    cmd = [sys.executable, "-m", "fetchtool", "analyze", str(capture), "--format", "json"]
    if cache_slots is not None:
        cmd += ["--cache-slots", str(cache_slots), "--cache-shards", str(cache_shards)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    return json.loads(out)


@lru_cache(maxsize=None)
def analysis_steps(capture: Path) -> dict[tuple[str, int], tuple]:
    """(broker, session id) -> the epoch steps `fetchtool sessions` prints (same analysis as `analyze`)."""
    from fetchtool.analysis.run import analyze_capture

    out: dict[tuple[str, int], tuple] = defaultdict(tuple)
    for s in analyze_capture([str(capture)]).sessions:
        out[(s.broker, s.session_id)] += s.steps
    return dict(out)


@lru_cache(maxsize=None)
def sessions_text(capture: Path) -> str:
    return subprocess.run([sys.executable, "-m", "fetchtool", "sessions", str(capture)], capture_output=True,
                          text=True, timeout=600, check=True, env={**os.environ, "COLUMNS": "250"}).stdout


def near_edge(run: br.RecordedRun, *times: float) -> bool:
    """A log time within a log tick or two of the capture's first or last packet: the wire may or may not hold it
    (log4j prints milliseconds, truncated). Such items are left out on both sides."""
    first, last = run.window
    return any(abs(t - first) < BOUNDARY_S or abs(t - last) < BOUNDARY_S for t in times)


def edge_sessions(run: br.RecordedRun) -> set[tuple[str, int]]:
    return {(run.node_broker[c.node], c.session_id) for c in run.record.all_created if near_edge(run, c.ts)}


def logged_sessions(run: br.RecordedRun) -> dict[tuple[str, int], br.SessionCreated]:
    """(broker, id) -> Kafka's creation line, for sessions created inside the capture window (not at its edge)."""
    first, last = run.window
    out = {}
    for c in run.record.all_created:
        if first <= c.ts <= last and not near_edge(run, c.ts):
            out[(run.node_broker[c.node], c.session_id)] = c
    return out


def logged_errors(run: br.RecordedRun, code: int) -> list[br.FetchRecord]:
    """The Fetch responses Kafka's request log shows with top-level error `code`, inside the capture window (not
    at its edge)."""
    first, last = run.window
    return [f for f in run.record.fetches if f.error_code == code and first <= f.received_ts and f.ts <= last
            and not near_edge(run, f.received_ts, f.ts)]


@lru_cache(maxsize=None)
def decode_rows(capture: Path) -> tuple[dict, ...]:
    out = subprocess.run([sys.executable, "-m", "fetchtool", "decode", str(capture), "--format", "jsonl"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return tuple(json.loads(line) for line in out.splitlines() if line.strip())


def fetchtool_sessions(capture: Path) -> dict[tuple[str, int], list[dict]]:
    out: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for s in analyze_json(capture)["sessions"]:
        out[(s["broker"], s["session_id"])].append(s)
    return dict(out)


def evictor_in_message(message: str) -> int | None:
    """The newer session an `evicted` finding names ("... when session N was created at frame F")."""
    m = re.search(r"session (\d+) was created", message)
    return int(m[1]) if m else None


# ---------------------------------------------------------------------------------------------------------------
# Sessions


@pytest.mark.parametrize("capture", per_capture("test_fetchtool_finds_exactly_the_sessions_kafka_created"))
def test_fetchtool_finds_exactly_the_sessions_kafka_created(capture):
    run = run_of(capture)
    theirs = set(logged_sessions(run))
    mine = {k for k, lives in fetchtool_sessions(capture).items()
            if any(not s["started_before_capture"] for s in lives)} - edge_sessions(run)
    assert mine == theirs, (f"fetchtool only: {sorted(mine - theirs)[:10]}; "
                            f"Kafka only: {sorted(theirs - mine)[:10]} (of {len(theirs)} created)")


@pytest.mark.parametrize("capture", per_capture("test_each_session_is_dated_when_kafka_created_it"))
def test_each_session_is_dated_when_kafka_created_it(capture):
    """created_ts within 20 ms of Kafka's creationMs: the eviction causes compare creation times with a victim's
    last successful request, so a session dated by its request (up to fetch.max.wait.ms early) looks older than
    it is."""
    run = run_of(capture)
    mine = fetchtool_sessions(capture)
    off = {}
    for key, created in logged_sessions(run).items():
        for s in mine.get(key, []):
            if s["created_ts"] is None or abs(s["created_ts"] - created.creation_ms / 1000) > 0.02:
                off[key] = (s["created_ts"], created.creation_ms / 1000)
    assert not off, f"{len(off)} sessions dated (fetchtool, Kafka creationMs): {list(off.items())[:3]}"


@pytest.mark.parametrize("capture", per_capture("test_each_session_belongs_to_the_connection_kafka_gave_it_to"))
def test_each_session_belongs_to_the_connection_kafka_gave_it_to(capture):
    run = run_of(capture)
    owners = run.record.owners()
    mine = fetchtool_sessions(capture)
    wrong = []
    for key in logged_sessions(run):
        owner = owners.get(key)
        assert owner is not None, f"{key}: created in the sessions log but no logged Fetch response carried it"
        lives = mine.get(key, [])
        got = [(s["client"], s["client_id"]) for s in lives]
        if (owner.client, owner.client_id) not in got:
            wrong.append((key, got, (owner.client, owner.client_id)))
    assert not wrong, f"{len(wrong)} sessions with another owner (fetchtool, Kafka): {wrong[:5]}"
    # `fetchtool sessions` heads each timeline "session ID on BROKER, client CLIENT_ID@IP:PORT, ..." (the heading
    # wraps to the console's width, so whitespace is ignored)
    text = "".join(sessions_text(capture).split())
    for (broker, sid), owner in owners.items():
        if (broker, sid) in logged_sessions(run):
            head = f"session{sid}on{broker},client{owner.client_id or '?'}@{owner.client}"
            assert head in text, f"`fetchtool sessions` has no timeline headed {head!r}"


@pytest.mark.parametrize("capture", per_capture("test_followers_sessions_are_privileged_as_kafka_created_them"))
def test_followers_sessions_are_privileged_as_kafka_created_them(capture):
    """Kafka logs `privileged=true` on a follower's session (it evicts those last); the JSON says the same and
    names the follower by the replica id Kafka's request log shows."""
    run = run_of(capture)
    logged = logged_sessions(run)
    if not any(c.privileged for c in logged.values()):
        pytest.skip(f"no follower session in {run.name}")
    owners = run.record.owners()
    mine = fetchtool_sessions(capture)
    for key, created in logged.items():
        for life in mine.get(key, []):
            assert life["privileged"] is created.privileged, key
            if created.privileged:
                assert life["replica_id"] == owners[key].replica_id >= 0, key


@pytest.mark.parametrize("capture", per_capture("test_each_session_starts_with_the_partitions_kafka_cached"))
def test_each_session_starts_with_the_partitions_kafka_cached(capture):
    run = run_of(capture)
    mine = fetchtool_sessions(capture)
    wrong = {}
    for key, created in logged_sessions(run).items():
        got = [s["first_partitions"] for s in mine.get(key, []) if not s["started_before_capture"]]
        if got != [created.size]:
            wrong[key] = (got, created.size)
    assert not wrong, f"first partitions (fetchtool, Kafka partitionMap.size) differ: {list(wrong.items())[:5]}"


def epoch_changes(capture: Path, created_in_capture: bool) -> tuple[dict, dict]:
    """(fetchtool, Kafka): (broker, id, request epoch) -> (added, forgotten/removed) for every accepted incremental
    fetch of the sessions created inside the capture (or of those created before it)."""
    run = run_of(capture)
    first, last = run.window
    inside = set(logged_sessions(run))
    # Kafka: its incremental contexts. FetchManager makes one as it reads the request, before any answer, so a
    # request cut in flight (its client closed the connection, its broker was SIGKILLed) was accepted all the
    # same; fetchtool shows it as a step with no response.
    # Contexts within a log tick of the capture's first or last packet are left out on both sides (ms ticks).
    boundary = {(run.node_broker[c.node], c.session_id, c.request_epoch) for c in run.record.all_incremental
                if abs(c.ts - last) < BOUNDARY_S or abs(c.ts - first) < BOUNDARY_S}
    theirs = {}
    for c in run.record.all_incremental:
        key = (run.node_broker[c.node], c.session_id, c.request_epoch)
        if (key[:2] in inside) == created_in_capture and first <= c.ts <= last and key not in boundary:
            theirs[key] = (c.added, c.removed)
    mine = {}
    for (broker, sid), steps in analysis_steps(capture).items():
        if ((broker, sid) in inside) != created_in_capture:
            continue
        for st in steps:
            if st.kind == "incremental" and st.error_code in (0, None) and (broker, sid, st.epoch) not in boundary:
                mine[(broker, sid, st.epoch)] = (st.added, st.forgotten)
    return mine, theirs


@pytest.mark.parametrize("capture", per_capture("test_every_incremental_epoch_adds_and_forgets_what_kafka_logged"))
def test_every_incremental_epoch_adds_and_forgets_what_kafka_logged(capture):
    mine, theirs = epoch_changes(capture, created_in_capture=True)
    if not theirs:
        assert not mine, "fetchtool shows accepted incremental fetches where Kafka logged none"
        return
    assert mine.keys() == theirs.keys(), (f"fetchtool only: {sorted(mine.keys() - theirs.keys())[:5]}; "
                                          f"Kafka only: {sorted(theirs.keys() - mine.keys())[:5]}")
    wrong = {k: (mine[k], theirs[k]) for k in theirs if mine[k] != theirs[k]}
    assert not wrong, f"(added, forgotten) per epoch, (fetchtool, Kafka): {list(wrong.items())[:5]}"


@pytest.mark.parametrize("capture", per_capture(
    "test_a_session_begun_before_the_capture_is_not_said_to_add_partitions_kafka_already_cached"))
def test_a_session_begun_before_the_capture_is_not_said_to_add_partitions_kafka_already_cached(capture):
    """A session created before tcpdump started: its partitions are unknown to the capture, but a partition Kafka
    'updated' (already cached) must not be reported as added, nor one it added as not."""
    mine, theirs = epoch_changes(capture, created_in_capture=False)
    if not theirs:
        pytest.skip("no session in this capture was created before it started")
    assert mine.keys() == theirs.keys(), (f"fetchtool only: {sorted(mine.keys() - theirs.keys())[:5]}; "
                                          f"Kafka only: {sorted(theirs.keys() - mine.keys())[:5]}")
    wrong = {k: (mine[k], theirs[k]) for k in theirs if mine[k][0] != theirs[k][0]}
    assert not wrong, f"(added, forgotten) per epoch, (fetchtool, Kafka): {list(wrong.items())[:5]}"


@pytest.mark.parametrize("capture", per_capture("test_each_session_counts_the_incremental_fetches_kafka_accepted"))
def test_each_session_counts_the_incremental_fetches_kafka_accepted(capture):
    """incremental_requests and last_epoch of each session created in the capture: Kafka's incremental contexts
    for it inside the capture (the epoch the last one carried is the last one accepted). FetchManager makes the
    context as it reads the request, before any answer: a request cut in flight (its client closed the
    connection, its broker was SIGKILLed) was accepted all the same, and fetchtool counts it."""
    run = run_of(capture)
    first, last = run.window
    epochs: dict[tuple[str, int], list[int]] = defaultdict(list)
    edge: set[tuple[str, int]] = set()  # a context within a log tick of the capture's edges: either side of it
    for c in run.record.all_incremental:
        key = (run.node_broker[c.node], c.session_id)
        if first <= c.ts <= last:
            epochs[key].append(c.request_epoch)
        if abs(c.ts - last) < BOUNDARY_S or abs(c.ts - first) < BOUNDARY_S:
            edge.add(key)
    mine = fetchtool_sessions(capture)
    wrong = {}
    for key in logged_sessions(run):
        if key in edge:
            continue
        accepted = epochs.get(key, [])
        theirs = (len(accepted), max(accepted, default=0))
        got = [(s["incremental_requests"], s["last_epoch"] or 0) for s in mine.get(key, [])]
        if len(got) != 1 or got[0] != theirs:
            wrong[key] = (got, theirs)
    assert not wrong, f"(incremental requests, last accepted epoch), (fetchtool, Kafka): {list(wrong.items())[:5]}"


@pytest.mark.parametrize("capture", per_capture("test_each_session_ends_with_as_many_partitions_as_kafka_cached"))
def test_each_session_ends_with_as_many_partitions_as_kafka_cached(capture):
    run = run_of(capture)
    by_id = run.record.all_incremental
    size: dict[tuple[str, int], list[int]] = {}
    for key, created in logged_sessions(run).items():
        size[key] = [created.size]
    for c in sorted(by_id, key=lambda c: c.ts):
        key = (run.node_broker[c.node], c.session_id)
        if key in size and c.ts <= run.window[1]:
            size[key].append(size[key][-1] + c.added - c.removed)
    mine = fetchtool_sessions(capture)
    wrong = {}
    for key, sizes in size.items():
        lives = mine.get(key, [])
        got = [(s["partitions"], s["max_partitions"]) for s in lives]
        if got != [(sizes[-1], max(sizes))]:
            wrong[key] = (got, (sizes[-1], max(sizes)))
    assert not wrong, f"(partitions at end, max), (fetchtool, Kafka): {list(wrong.items())[:5]}"


@pytest.mark.parametrize("capture", per_capture("test_sessions_end_the_way_kafka_ended_them"))
def test_sessions_end_the_way_kafka_ended_them(capture):
    """closed: a full request removed it ("Removed fetch session X"); evicted: an eviction line names it; lost: its
    broker was killed while it lived; else it is alive when the capture stops."""
    run = run_of(capture)
    first, last = run.window
    closed = {(run.node_broker[f.node], f.removed_session) for log in run.record.sessions.values()
              for f in log.closed_by_full if first <= f.ts <= last}
    closed |= {(run.node_broker[e.node], e.session_id) for log in run.record.sessions.values() for e in log.emptied
               if first <= e.ts <= last}
    evicted = {(run.node_broker[e.node], e.victim_id) for e in run.record.all_evictions if e.ts <= last}
    deaths = run.node_deaths()
    expected = {}
    for key, created in logged_sessions(run).items():
        node = run.session_node(key[0])
        if key in closed:
            expected[key] = "closed"
        elif key in evicted:
            expected[key] = "evicted"
        elif any(n == node and created.ts < t <= last for n, t, _ in deaths):
            expected[key] = "lost"
        else:
            expected[key] = "alive"
    mine = fetchtool_sessions(capture)
    got = {key: [s["end"] for s in mine.get(key, [])] for key in expected}
    wrong = {k: (got[k], expected[k]) for k in expected if got[k] != [expected[k]]}
    tally = Counter((tuple(g), e) for g, e in wrong.values())
    assert not wrong, f"session ends (fetchtool, Kafka): {dict(tally)}; e.g. {list(wrong.items())[:3]}"


@pytest.mark.parametrize("capture", per_capture("test_no_session_is_reported_alive_after_its_broker_died"))
def test_no_session_is_reported_alive_after_its_broker_died(capture):
    """Kafka's record: sessions a node created before it was SIGKILLed died with it (a restarted node starts with
    an empty cache). fetchtool must end each of them, at the latest at its owner's first exchange with the
    restarted node (the first moment a capture can tell), or when the node accepted again if the owner never
    came back."""
    run = run_of(capture)
    deaths = run.node_deaths()
    if not deaths:
        pytest.skip(f"no broker died in {run.name}")
    owners = run.record.owners()
    outlived = []
    for node, killed, back in deaths:
        broker = run.node_broker[node]
        doomed = {c.session_id for c in run.record.sessions[node].created if c.ts < killed}
        for s in analyze_json(capture)["sessions"]:
            if s["broker"] != broker or s["session_id"] not in doomed:
                continue
            owner = owners.get((broker, s["session_id"]))
            client_id = owner.client_id if owner else s["client_id"]
            # the owner comes back on a new connection: same client id, new port
            again = [r["ts"] for r in decode_rows(capture) if r["broker"] == broker and r["client_id"] == client_id
                     and r["api_key"] == 1 and back is not None and r["ts"] >= back - BOUNDARY_S]
            limit = min(again) if again else (back if back is not None else run.window[1])
            if s["end"] == "alive" or s["end_ts"] is None or s["end_ts"] > limit + BOUNDARY_S:
                outlived.append((s["session_id"], s["client_id"], s["end"], s["end_reason"], s["end_ts"],
                                 f"node killed {killed}, accepting again {back}, owner back at {limit}"))
    assert not outlived, f"sessions fetchtool keeps alive after their broker died: {outlived}"


# ---------------------------------------------------------------------------------------------------------------
# Session errors and their causes


def findings(capture: Path, code: str, told_cache: bool = False) -> list[dict]:
    if told_cache:
        run = run_of(capture)
        report = analyze_json(capture, run.cache_slots, run.cache_shards)
    else:
        report = analyze_json(capture)
    return [f for f in report["findings"] if f["code"] == code]


@pytest.mark.parametrize("capture", per_capture("test_every_session_error_kafka_answered_is_a_finding"))
def test_every_session_error_kafka_answered_is_a_finding(capture):
    run = run_of(capture)
    for code, name in ((70, "FETCH_SESSION_ID_NOT_FOUND"), (71, "INVALID_FETCH_SESSION_EPOCH"),
                       (106, "FETCH_SESSION_TOPIC_ID_ERROR")):
        logged = logged_errors(run, code)
        theirs = Counter((f.broker, f.client, f.session_id) for f in logged)
        at_edge = {f.key for f in run.record.fetches if f.error_code == code and near_edge(run, f.received_ts, f.ts)}
        rows = {r["request_frame"]: r for r in decode_rows(capture)}
        mine = Counter()
        for f in findings(capture, name):
            row = rows.get(f["request_frame"])
            if row is not None and (row["client"], row["correlation_id"]) in at_edge:
                continue
            mine[(f["broker"], f["client"], f["session_id"])] += f.get("count", 1)
        assert mine == theirs, f"{name}: fetchtool {dict(mine)} vs Kafka's request log {dict(theirs)}"
        # the frame a finding points to is the request Kafka answered with that error
        if logged:
            for f in findings(capture, name):
                row = rows[f["request_frame"]]
                assert (row["client"], row["correlation_id"]) in {x.key for x in logged} | at_edge, (f, row)


def check_evicted_causes(capture: Path, told_cache: bool) -> None:
    run = run_of(capture)
    evictions = {(run.node_broker[e.node], e.victim_id): e for e in run.record.all_evictions}
    for f in findings(capture, "FETCH_SESSION_ID_NOT_FOUND", told_cache):
        if f["cause"] != "evicted":
            continue
        e = evictions.get((f["broker"], f["session_id"]))
        assert e is not None, f"fetchtool says {f['session_id']} was evicted; Kafka's log has no such eviction"
        assert e.evictor is not None
        assert evictor_in_message(f["message"]) == e.evictor.session_id, (
            f"{f['session_id']}: fetchtool names evictor {evictor_in_message(f['message'])}, Kafka's log "
            f"{e.evictor.session_id} (shard {e.shard}, {'stale' if e.stale else 'by size'})")


def check_70s_after_evictions(capture: Path, told_cache: bool) -> None:
    run = run_of(capture)
    evicted = {(run.node_broker[e.node], e.victim_id): e for e in run.record.all_evictions}
    due = {(f.broker, f.session_id) for f in logged_errors(run, 70) if (f.broker, f.session_id) in evicted}
    if not due:
        pytest.skip(f"no error 70 after an eviction in {run.name}")
    causes = defaultdict(set)
    for f in findings(capture, "FETCH_SESSION_ID_NOT_FOUND", told_cache):
        causes[(f["broker"], f["session_id"])].add(f["cause"])
    wrong = {k: sorted(causes.get(k, {"(no finding)"})) for k in due if causes.get(k) != {"evicted"}}
    assert not wrong, f"70s Kafka logged after evicting the session, fetchtool's causes: {wrong}"


@pytest.mark.parametrize("capture", per_capture("test_error_70_is_blamed_on_eviction_only_where_kafka_evicted"))
def test_error_70_is_blamed_on_eviction_only_where_kafka_evicted(capture):
    check_evicted_causes(capture, told_cache=False)


@pytest.mark.parametrize("capture", per_capture(
    "test_error_70_is_blamed_on_eviction_only_where_kafka_evicted_given_the_cache_size"))
def test_error_70_is_blamed_on_eviction_only_where_kafka_evicted_given_the_cache_size(capture):
    check_evicted_causes(capture, told_cache=True)


@pytest.mark.parametrize("capture", per_capture("test_every_70_after_a_kafka_eviction_is_explained_as_eviction"))
def test_every_70_after_a_kafka_eviction_is_explained_as_eviction(capture):
    check_70s_after_evictions(capture, told_cache=False)


@pytest.mark.parametrize("capture", per_capture(
    "test_every_70_after_a_kafka_eviction_is_explained_as_eviction_given_the_cache_size"))
def test_every_70_after_a_kafka_eviction_is_explained_as_eviction_given_the_cache_size(capture):
    check_70s_after_evictions(capture, told_cache=True)


@pytest.mark.parametrize("capture", per_capture("test_every_70_after_a_broker_restart_is_blamed_on_the_restart"))
def test_every_70_after_a_broker_restart_is_blamed_on_the_restart(capture):
    """Kafka's record: the session was created in the node's log before the node was SIGKILLed, and the 70 came
    from the restarted node (whose cache starts empty)."""
    run = run_of(capture)
    deaths = run.node_deaths()
    if not deaths:
        pytest.skip(f"no broker died in {run.name}")
    created = {(run.node_broker[c.node], c.session_id): c for c in run.record.all_created}
    due = set()
    for f in logged_errors(run, 70):
        c = created.get((f.broker, f.session_id))
        node = run.session_node(f.broker)
        if c and any(n == node and c.ts < t and (back or 0) <= f.received_ts for n, t, back in deaths):
            due.add((f.broker, f.session_id))
    if not due:
        pytest.skip(f"no 70 after the restart in {run.name}")
    causes = defaultdict(set)
    for f in findings(capture, "FETCH_SESSION_ID_NOT_FOUND"):
        causes[(f["broker"], f["session_id"])].add(f["cause"])
    wrong = {k: sorted(causes.get(k, {"(no finding)"})) for k in due if causes.get(k) != {"broker_restart"}}
    assert not wrong, f"70s from the restarted broker, fetchtool's causes: {wrong}"


@pytest.mark.parametrize("capture", per_capture("test_sessions_kafka_refused_are_the_refusals_fetchtool_counts"))
def test_sessions_kafka_refused_are_the_refusals_fetchtool_counts(capture):
    """A refusal ("No fetch session created") answers a session-creating full fetch with id 0."""
    run = run_of(capture)
    first, last = run.window
    theirs = Counter()
    for log in run.record.sessions.values():
        for r in log.refused:
            if first <= r.ts <= last:
                theirs[run.node_broker[r.node]] += 1
    mine = {b["broker"]: b["refused_creations"] for b in analyze_json(capture)["brokers"]}
    assert {b: n for b, n in mine.items() if n} == dict(theirs)
