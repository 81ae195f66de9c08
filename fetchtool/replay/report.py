"""Reports of simulate and replay: the design.md JSON contracts and rich tables for people."""

from __future__ import annotations

from collections import Counter
from itertools import islice

from rich.console import Console

from fetchtool.analysis.reports.fit import Cell, Col, Fit

from fetchtool.commands.wording import count
from fetchtool.printable import one_line
from fetchtool.replay.jsonout import Rows
from fetchtool.replay.plan import ReplayPlan
from fetchtool.replay.simulate import SimResult
from fetchtool.replay.tally import CapturedCounts, Tally
from fetchtool.sessions.cache import DEFAULT_EVICTION_MS, DEFAULT_SHARDS

SESSION_ERRORS = (70, 71, 106)


# -------------------------------------------------------------------------------------------- simulate
def simulate_json(plan: ReplayPlan, captured: CapturedCounts, results: list[SimResult]) -> dict:
    """`fetchtool simulate --format json` (design.md contract). Each configuration's clients are `Rows`, made
    as they are written (jsonout.json_text) or read: one per client stream, 100,000 on a session storm."""
    streams = plan.streams

    def clients(r: SimResult) -> Rows:
        def client(n: int) -> dict:
            s = streams[n]
            return {
                **s.identity(),
                **r.streams[s.index].to_json(),
                "evictions_caused": r.evicted_by.get(s.index, 0),
                "captured": captured.streams[s.index].to_json(),
            }
        return Rows(len(streams), client)

    return {
        "captured": captured.totals.to_json(),
        "captured_brokers": [{"broker": b, **t.to_json()} for b, t in sorted(captured.brokers.items())],
        "configs": [
            {
                **r.config.to_json(),
                "totals": r.totals.to_json(),
                "brokers": [
                    {"broker": b, **t.to_json(), "captured": captured.brokers[b].to_json()}
                    for b, t in sorted(r.brokers.items())
                ],
                "clients": clients(r),
            }
            for r in results
        ],
        "plan": {"requests": plan.requests, "streams": len(plan.streams), "duration_s": plan.duration_ms / 1000,
                 "skipped": dict(plan.skipped)},
    }


def _other_errors(t: Tally) -> int:
    return sum(n for c, n in t.errors.items() if c not in SESSION_ERRORS)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.2f}"


TOTALS_COLS = (Col("configuration"), Col("requests", right=True), Col("sessions created", right=True),
               Col("evictions", right=True), Col("70", right=True), Col("71", right=True),
               Col("other errors", right=True), Col("incremental", right=True), Col("request MB", right=True),
               Col("response MB", right=True))  # fmt: skip


def _totals_row(label: str, t: Tally) -> tuple[str, ...]:
    return (label, f"{t.requests:,}", f"{t.sessions_created:,}", f"{t.evictions:,}", f"{t.errors.get(70, 0):,}",
            f"{t.errors.get(71, 0):,}", f"{_other_errors(t):,}", f"{t.incremental_share:.0%}", _mb(t.request_bytes),
            _mb(t.response_bytes))  # fmt: skip


def _config_name(config) -> str:
    return (f"slots={config.cache_slots}" + (f"/{config.cache_shards}" if config.cache_shards != DEFAULT_SHARDS else "")
            + (f" {config.eviction_ms}ms" if config.eviction_ms != DEFAULT_EVICTION_MS else ""))


def print_simulate(console: Console, plan: ReplayPlan, captured: CapturedCounts, results: list[SimResult],
                   max_clients: int = 20) -> None:
    """Tables when they fit the console, one card per row otherwise (analysis.reports.fit): no id is cut."""
    console.print(f"[bold]Plan[/bold]: {count(plan.requests, 'fetch')} from {count(len(plan.clients), 'client')} to "
                  f"{count(len(plan.brokers), 'broker')} over {plan.duration_ms / 1000:,.1f} s")
    rows: list[tuple[Cell, ...]] = [_totals_row("captured", captured.totals),
                                    *(_totals_row(str(r.config), r.totals) for r in results)]
    console.print(Fit("Totals: the capture and each configuration (slots/shards/eviction)", TOTALS_COLS, rows))
    if len(plan.brokers) > 1:
        for broker in plan.brokers:
            rows = [_totals_row("captured", captured.brokers[broker]),
                    *(_totals_row(str(r.config), r.brokers[broker]) for r in results)]
            console.print(Fit(f"Broker {broker}", TOTALS_COLS, rows))

    def cell(t: Tally) -> str:
        return f"{t.errors.get(70, 0):,}/{t.errors.get(71, 0):,} new {t.sessions_created:,}"

    def badness(s) -> int:
        cap = captured.streams[s.index]
        return cap.errors.get(70, 0) + cap.errors.get(71, 0) + sum(
            r.streams[s.index].errors.get(70, 0) + r.streams[s.index].errors.get(71, 0) for r in results)

    # Per client: the session errors side by side, worst first.
    cols = (Col("client"), Col("broker"), Col("behaviour"), Col("captured", right=True),
            *(Col(_config_name(r.config), right=True) for r in results))
    ranked = sorted(plan.streams, key=badness, reverse=True)
    rows = [(s.label, s.broker, s.behaviour, cell(captured.streams[s.index]),
             *[cell(r.streams[s.index]) for r in results]) for s in ranked[:max_clients]]
    console.print(Fit("Clients: errors 70/71 and sessions created (captured | each configuration)", cols, rows))
    if len(ranked) > max_clients:
        console.print(f"... {count(len(ranked) - max_clients, 'more client stream')} (use --format json for all)")


# -------------------------------------------------------------------------------------------- replay
def replay_json(run, captured: CapturedCounts) -> dict:
    """`fetchtool replay --format json` (design.md contract)."""
    from fetchtool.replay.driver import divergence, percentile

    totals = run.totals()
    rtts = [ms for r in run.streams for ms in r.rtts_ms]
    partition_errors: Counter[int] = Counter()
    for r in run.streams:
        partition_errors.update(r.partition_errors)
    captured_partitions = captured_partition_errors(run)
    none: Counter[int] = Counter()
    streams = run.streams

    def client(n: int) -> dict:
        # made as the report is written (jsonout.Rows): a storm's 100,000 rows as dicts took 150 MB
        r = streams[n]
        return {
            **r.stream.identity(),
            **r.tally.to_json(),
            "sessions_established": r.tally.sessions_created,
            "rtt_ms": {"p50": percentile(r.rtts_ms, 0.5), "p99": percentile(r.rtts_ms, 0.99)},
            "timeouts": r.timeouts,
            "partition_errors": _codes_json(r.partition_errors),
            "session_ids": {str(c): live for c, live in r.session_ids.items()},
            "problem": r.problem,
            "captured": {**captured.streams[r.stream.index].to_json(),
                         "partition_errors": _codes_json(captured_partitions.get(r.stream.index, none))},
        }

    return {
        "target": run.target,
        "totals": {**totals.to_json(), "responses": totals.responses,
                   "rtt_ms": {"p50": percentile(rtts, 0.5), "p99": percentile(rtts, 0.99)},
                   "timeouts": sum(r.timeouts for r in run.streams), "partition_errors": _codes_json(partition_errors)},
        "captured": {**captured.totals.to_json(),
                     "partition_errors": _codes_json(sum(captured_partitions.values(), Counter()))},
        "clients": Rows(len(run.streams), client),
        "divergence": divergence(run, captured.streams),
        "notes": [*run.notes, *byte_notes(run, totals, captured.totals)],
        "speed": "as-fast-as-possible" if run.options.as_fast else run.options.speed,
        "sessions": run.options.sessions,
        "config": run.options.config.to_json() if run.target == "embedded" else None,
        "elapsed_s": round(run.elapsed_s, 3),
        "finished": run.finished,
        "interrupted": run.interrupted,
        "broker_metrics": run.broker_metrics,
    }


def byte_notes(run, replayed: Tally, captured: Tally) -> list[str]:
    """Why the replay's byte counts are not the capture's: it re-issues the fetches, not the captured bytes."""
    if not run.finished:  # every count is short of the capture's: that is the one thing to say
        return [f"the replay stopped after {replayed.requests:,} of {count(captured.requests, 'request')}: the "
                "totals cover what was sent"]
    notes = []
    if replayed.response_bytes != captured.response_bytes:
        source = ("the embedded broker answers from logs pre-filled with 16-byte placeholder records up to the "
                  "rebased captured offsets" if run.target == "embedded" else
                  f"{run.target} answers from its own records (or the placeholder records replay wrote into "
                  "topics it created)")
        notes.append(f"response bytes differ from the capture's ({_mb(replayed.response_bytes)} MB replayed, "
                     f"{_mb(captured.response_bytes)} MB captured): {source}, not the captured records")
    if replayed.request_bytes != captured.request_bytes:
        notes.append(f"request bytes differ from the capture's ({_mb(replayed.request_bytes)} MB replayed, "
                     f"{_mb(captured.request_bytes)} MB captured): each client sends what its live fetch session "
                     "needs (partitions added, changed or forgotten) in the Fetch version the target speaks")
    return notes


def captured_partition_errors(run) -> dict[int, Counter]:
    """Per stream index with any: the partition-level error codes the capture's responses carried (the plan's
    reads, walked once by the replay: ReplayRun.captured_partition_errors)."""
    if run.captured_partition_errors is None:
        from fetchtool.replay.driver import captured_log

        run.captured_partition_errors = captured_log(run.plan).partition_errors
    return run.captured_partition_errors


def _codes_json(errors: Counter) -> dict:
    return {str(code): n for code, n in sorted(errors.items()) if n}


def print_replay(console: Console, run, captured: CapturedCounts) -> None:
    doc = replay_json(run, captured)
    state = "complete" if run.finished else "[yellow]partial (interrupted)[/yellow]"
    console.print(f"[bold]Replay[/bold] against {run.target} ({state}): {count(doc['totals']['requests'], 'request')} in "
                  f"{run.elapsed_s:,.1f} s, speed {doc['speed']}, sessions {run.options.sessions}")
    cols = (Col(""), *(Col(c, right=True) for c in ("requests", "responses", "sessions", "70", "71", "other errors",
                                                     "incremental", "request MB", "response MB", "rtt p50 ms",
                                                     "rtt p99 ms")))  # fmt: skip
    cap, live, rtt = captured.totals, run.totals(), doc["totals"]["rtt_ms"]
    rows: list[tuple[Cell, ...]] = [(name, f"{t.requests:,}", f"{t.responses:,}", f"{t.sessions_created:,}", f"{t.errors.get(70, 0):,}",
             f"{t.errors.get(71, 0):,}", f"{_other_errors(t):,}", f"{t.incremental_share:.0%}", _mb(t.request_bytes),
             _mb(t.response_bytes), *ms) for name, t, ms in (("captured", cap, ("", "")),
                                                            ("replay", live, (_ms(rtt["p50"]), _ms(rtt["p99"]))))]
    console.print(Fit("Totals: the capture and the replay", cols, rows))
    cols = tuple(Col(c) for c in ("client", "broker", "behaviour", "sent", "answered", "sessions", "errors (replay)",
                                  "errors (captured)", "rtt p50/p99 ms"))  # fmt: skip
    rows = [(f"{c['client']} ({one_line(c['client_id'])})" if c["client_id"] else c["client"], c["broker"], c["behaviour"],
             f"{c['requests']:,}", f"{c['responses']:,}", f"{c['sessions_established']:,}", _codes(c["errors"]),
             _codes(c["captured"]["errors"]), f"{_ms(c['rtt_ms']['p50'])}/{_ms(c['rtt_ms']['p99'])}")
            for c in islice(doc["clients"], 30)]
    console.print(Fit("Clients", cols, rows))
    if doc["divergence"]:
        cols = tuple(Col(c) for c in ("client", "broker", "error", "captured", "replay", "where"))
        rows = [(d["client"], d["broker"], str(d["error"]), str(d["captured"]), str(d["replay"]),
                 "only in the capture" if d["direction"] == "captured_only" else "only in the replay")
                for d in doc["divergence"][:30]]
        console.print(Fit("Divergence from the capture", cols, rows))
    else:
        console.print("No divergence: the replay got the same errors as the capture, client by client.")
    for note in doc["notes"]:
        console.print(f"note: {note}")


def _ms(value: float | None) -> str:
    """An rtt cell: '-' where nothing was measured (no response); JSON keeps null."""
    return "-" if value is None else str(value)


def _codes(errors: dict) -> str:
    return ", ".join(f"{code}x{n:,}" for code, n in errors.items()) or "-"


def plan_summary_lines(plan: ReplayPlan, speed: float | None) -> list[str]:
    """--dry-run: clients, requests, expected duration."""
    s = plan.summary()
    expected = "as fast as possible" if speed is None else f"{plan.duration_ms / 1000 / speed:,.1f} s at speed {speed:g}"
    lines = [
        f"{count(s['requests'], 'Fetch request')} from {count(s['clients'], 'client')} in "
        f"{count(s['streams'], 'connection')} to {count(len(s['brokers']), 'broker')}; capture spans "
        f"{s['duration_s']:,.1f} s; expected replay: {expected}",
        "topics: " + (", ".join(f"{n} ({count(p, 'partition')})" for n, p in s["topics"].items()) or "-"),
        "session behaviour: " + ", ".join(f"{k} {v}" for k, v in s["behaviours"].items()),
    ]
    if s["skipped"]:
        lines.append("not replayed: " + ", ".join(f"{k} {v}" for k, v in s["skipped"].items()))
    for st in s["per_stream"]:
        lines.append(f"  {st['client']} ({one_line(st['client_id'])}) -> {st['broker']}: {count(st['requests'], 'fetch')}, "
                     f"{count(st['partitions'], 'partition')}, {st['behaviour']}{', follower' if st['follower'] else ''}")
    return lines
