"""Fetch traffic and partition errors as report rows: one table of rates and response times per broker and client,
one of partition errors. The terminal and Markdown reports render the same rows; columns stay narrow enough for an
80-column terminal."""

from __future__ import annotations


from fetchtool.analysis.model import Analysis, TrafficSummary
from fetchtool.analysis.reports.fit import Col, Fit
from fetchtool.analysis.tracking.latency import RELATIVE_ERROR
from fetchtool.printable import one_line

MAX_ERROR_ROWS = 30
TRAFFIC_HEAD = ("who", "fetch/s", "p50/p99 ms", "empty", "MaxWait")
ERROR_HEAD = ("partition", "error (code)", "times", "recovered")
TRAFFIC_NOTE = (f"Response times are request to response on the wire, within {RELATIVE_ERROR:.0%}; empty: share of "
                "responses with no records and no error; MaxWait: empty answers held for MaxWaitMs (checked: "
                "empty, error-free, unthrottled answers to MaxWait > 0 and MinBytes >= 1).")


def _num(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _ms(v: float | None) -> str:
    """Short: 0.13, 4.2, 993."""
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 1 else f"{v:.1f}" if v < 10 else f"{v:,.0f}"


def max_wait_text(t: TrafficSummary) -> str:
    if not t.max_wait_checked:
        return "-"
    held = t.max_wait_checked - t.max_wait_early
    verdict = {True: "held", False: "IGNORED", None: "held?"}[t.max_wait_honoured]
    return f"{verdict} {held:,}/{t.max_wait_checked:,}"


def traffic_rows(a: Analysis) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for who, t in [(f"broker {b.broker}", b.traffic) for b in a.brokers] + [(c.label, c.traffic) for c in a.clients]:
        if t is None or not t.fetches:
            continue
        empty = "-" if t.empty_share is None else f"{t.empty_share:.0%}"
        times = f"{_ms(t.response_ms.get('p50'))}/{_ms(t.response_ms.get('p99'))}"
        rows.append((who, _num(t.fetches_per_s), times, empty, max_wait_text(t)))
    return rows


def error_groups(a: Analysis) -> list[tuple[str, list[tuple[str, ...]]]]:
    """("client -> broker", rows) in order of first error, the first MAX_ERROR_ROWS rows in all."""
    groups: dict[str, list[tuple[str, ...]]] = {}
    for r in a.partition_errors[:MAX_ERROR_ROWS]:
        rows = groups.setdefault(f"{one_line(r.client_id or '?')}@{r.host} -> {r.broker}", [])
        rows.append((r.partition_name, f"{r.error} ({r.error_code})", f"{r.count:,}", "yes" if r.recovered else "NO"))
    return list(groups.items())


def traffic_table(a: Analysis) -> Fit | None:
    rows = traffic_rows(a)
    if not rows:
        return None
    cols = tuple(Col(c, right=i > 0) for i, c in enumerate(TRAFFIC_HEAD))
    return Fit("Fetch traffic", cols, rows, caption=TRAFFIC_NOTE)


def errors_tables(a: Analysis) -> list[Fit]:
    """One small table per client and broker (four narrow columns: readable at 80 columns)."""
    cols = (Col(ERROR_HEAD[0]), Col(ERROR_HEAD[1]), Col(ERROR_HEAD[2], right=True), Col(ERROR_HEAD[3]))
    tables = [Fit(f"Partition errors: {who}", cols, rows, label="partition {}") for who, rows in error_groups(a)]
    if tables and len(a.partition_errors) > MAX_ERROR_ROWS:
        tables[-1].caption = (f"{len(a.partition_errors) - MAX_ERROR_ROWS:,} more in --format json "
                              "(brokers[].partition_errors)")
    return tables


def _md_row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def markdown(a: Analysis) -> list[str]:
    out: list[str] = []
    rows = traffic_rows(a)
    if rows:
        out += ["## Fetch traffic", "", _md_row(TRAFFIC_HEAD), "|" + "---|" * len(TRAFFIC_HEAD)]
        out += [_md_row(r) for r in rows]
        out += ["", TRAFFIC_NOTE, ""]
    if a.partition_errors:
        out += [f"## Partition errors ({len(a.partition_errors):,})", ""]
        for who, rows in error_groups(a):
            out += [f"{who}:", "", _md_row(ERROR_HEAD), "|" + "---|" * len(ERROR_HEAD)]
            out += [_md_row(r) for r in rows] + [""]
        if len(a.partition_errors) > MAX_ERROR_ROWS:
            out += [f"{len(a.partition_errors) - MAX_ERROR_ROWS:,} more: see `fetchtool analyze --format json`.", ""]
    return out
