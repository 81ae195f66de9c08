"""Reports of simulate and replay: the design.md JSON contracts and rich tables for people."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fetchtool.replay.plan import ReplayPlan
from fetchtool.replay.simulate import SimResult
from fetchtool.replay.tally import CapturedCounts, Tally

SESSION_ERRORS = (70, 71, 106)


# -------------------------------------------------------------------------------------------- simulate
def simulate_json(plan: ReplayPlan, captured: CapturedCounts, results: list[SimResult]) -> dict:
    """`fetchtool simulate --format json` (design.md contract)."""
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
                "clients": [
                    {
                        "client": s.client,
                        "client_id": s.client_id,
                        "broker": s.broker,
                        "behaviour": s.behaviour,
                        **r.streams[s.index].to_json(),
                        "evictions_caused": r.evicted_by.get(s.index, 0),
                        "captured": captured.streams[s.index].to_json(),
                    }
                    for s in plan.streams
                ],
            }
            for r in results
        ],
        "plan": {"requests": plan.requests, "streams": len(plan.streams), "duration_s": plan.duration_ms / 1000,
                 "skipped": dict(plan.skipped)},
    }


def _errors_cell(t: Tally, code: int) -> str:
    n = t.errors.get(code, 0)
    return f"[red]{n}[/red]" if n else "0"


def _other_errors(t: Tally) -> int:
    return sum(n for c, n in t.errors.items() if c not in SESSION_ERRORS)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.2f}"


def _totals_row(label: str, t: Tally) -> list[str]:
    return [label, f"{t.requests:,}", f"{t.sessions_created:,}", f"{t.evictions:,}", _errors_cell(t, 70),
            _errors_cell(t, 71), str(_other_errors(t)), f"{t.incremental_share:.0%}", _mb(t.request_bytes),
            _mb(t.response_bytes)]


def _totals_table(title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("configuration", "requests", "sessions created", "evictions", "70", "71", "other errors",
                "incremental", "request MB", "response MB"):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    return table


def print_simulate(console: Console, plan: ReplayPlan, captured: CapturedCounts, results: list[SimResult],
                   max_clients: int = 20) -> None:
    console.print(f"[bold]Plan[/bold]: {plan.requests:,} fetches from {len(plan.clients)} clients to "
                  f"{len(plan.brokers)} broker(s) over {plan.duration_ms / 1000:,.1f} s")
    table = _totals_table("Totals: the capture and each configuration (slots/shards/eviction)")
    table.add_row(*_totals_row("captured", captured.totals), style="dim")
    for r in results:
        table.add_row(*_totals_row(str(r.config), r.totals))
    console.print(table)
    if len(plan.brokers) > 1:
        for broker in plan.brokers:
            bt = _totals_table(f"Broker {broker}")
            bt.add_row(*_totals_row("captured", captured.brokers[broker]), style="dim")
            for r in results:
                bt.add_row(*_totals_row(str(r.config), r.brokers[broker]))
            console.print(bt)
    # Per client: the session errors side by side, worst first.
    ct = Table(title="Clients: errors 70/71 and sessions created (captured | each configuration)", title_justify="left")
    ct.add_column("client")
    ct.add_column("broker")
    ct.add_column("behaviour")
    ct.add_column("captured", justify="right")
    for r in results:
        ct.add_column(f"slots={r.config.cache_slots}" + (f"/{r.config.cache_shards}" if r.config.cache_shards != 8 else "")
                      + (f" {r.config.eviction_ms}ms" if r.config.eviction_ms != 120_000 else ""), justify="right")

    def cell(t: Tally) -> str:
        return f"{t.errors.get(70, 0)}/{t.errors.get(71, 0)} new {t.sessions_created}"

    def badness(s) -> int:
        cap = captured.streams[s.index]
        return cap.errors.get(70, 0) + cap.errors.get(71, 0) + sum(
            r.streams[s.index].errors.get(70, 0) + r.streams[s.index].errors.get(71, 0) for r in results)

    ranked = sorted(plan.streams, key=badness, reverse=True)
    for s in ranked[:max_clients]:
        ct.add_row(s.label, s.broker, s.behaviour, cell(captured.streams[s.index]),
                   *[cell(r.streams[s.index]) for r in results])
    console.print(ct)
    if len(ranked) > max_clients:
        console.print(f"... {len(ranked) - max_clients} more client streams (use --format json for all)")
