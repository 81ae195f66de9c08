"""Rendering the `savings` object (SavingsResult.to_json()): rich table + bar chart, and Markdown.

Works on the JSON dict so `analyze` reports and `fetchtool savings` show the same figures.
"""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from fetchtool.analysis.reports.units import human

BAR = 40
# lost_by_cause keys as a sentence names them (the JSON keeps the keys)
CAUSES = {"cache_full": "refused, cache full", "not_granted": "refused by a broker that keeps no sessions",
          "session_start": "first full fetches", "churn": "new sessions never used", "close": "closed sessions"}


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _label(c: dict) -> str:
    return f"{c.get('client_id') or '?'}@{c['client']}"


def excess_text(t: dict) -> str:
    """The part of the saving that working sessions still carry (savings.py: the categories add up to it)."""
    excess = t.get("excess_bytes") or 0
    req, resp = t.get("excess_request_bytes") or 0, t.get("excess_response_bytes") or 0
    if not (excess or req or resp):
        return ""
    return (f"; working sessions carry {human(excess)} more than their incremental equivalent (requests "
            f"{human(req)}: unchanged partitions resent; responses {human(resp)})")


def summary_lines(s: dict) -> list[str]:
    """A few sentences a support engineer can paste into a ticket."""
    t = s.get("total") or {}
    if not t.get("exchanges"):
        return ["No Fetch exchanges to estimate."]
    hours = t.get("saved_bytes_per_hour")
    per_hour = f" ({human(hours)}/h of capture time)" if hours is not None else ""
    lines = [
        f"{t['exchanges']:,} Fetch exchanges: {human(t['actual_bytes'])} on the wire, of which "
        f"{human(t['records_bytes'])} records and {human(t['metadata_bytes'])} fetch metadata.",
        f"With working incremental fetch sessions: {human(t['incremental_bytes'])}; saving {human(t['saved_bytes'])}"
        f"{per_hour} = {pct(t['saved_share_of_metadata'])} of the metadata bytes, {pct(t['saved_share_of_all'])} of "
        f"all fetch bytes.",
        f"Already saved by sessions that work: {human(t['realised_bytes'])}. Sessionless clients could save "
        f"{human(t['potential_bytes'])}; failing sessions lose {human(t['lost_bytes'])}"
        + (" (" + ", ".join(f"{CAUSES.get(k, k)}: {human(v)}" for k, v in t["lost_by_cause"].items() if v) + ")"
           if any(t["lost_by_cause"].values()) else "") + excess_text(t) + ".",
    ]
    proj = t.get("projection") or {}
    if proj:
        lines.append("Same workload with more partitions and the same change rate: " + "; ".join(
            f"{k}: {human(p['actual_bytes'])} now vs {human(p['incremental_bytes'])} with sessions"
            for k, p in proj.items()) + ".")
    lines += list(s.get("notes") or [])
    return lines


def client_table(s: dict, limit: int = 30) -> Table:
    """Eight columns, so it fits an 80-column terminal; the JSON has every other figure."""
    t = Table(title="Per client: bytes as captured, as full fetches, and with working incremental sessions",
              expand=False)
    for col in ("client", "fetches", "actual", "full", "incr.", "saved", "% meta", "lost"):
        t.add_column(col, justify="left" if col == "client" else "right", overflow="fold")
    for c in s.get("per_client", [])[:limit]:
        t.add_row(_label(c), f"{c['exchanges']:,}", human(c["actual_bytes"]), human(c["full_bytes"]),
                  human(c["incremental_bytes"]), human(c["saved_bytes"]), pct(c["saved_share_of_metadata"]),
                  human(c["lost_bytes"]))
    return t


def chart(s: dict, limit: int = 20, width: int = BAR) -> Text:
    """Actual vs incremental bytes per client, as bars on one scale."""
    clients = s.get("per_client", [])[:limit]
    out = Text()
    if not clients:
        return out
    top = max(max(c["actual_bytes"], c["incremental_bytes"]) for c in clients) or 1
    name_w = min(36, max(len(_label(c)) for c in clients))
    for c in clients:
        label = _label(c)[:name_w].ljust(name_w)
        for what, key, style in (("actual", "actual_bytes", "red"), ("incr.", "incremental_bytes", "green")):
            n = c[key]
            bar = "█" * max(1 if n else 0, round(n / top * width))
            out.append(f"{label} {what:>6} ")
            out.append(bar.ljust(width), style=style)
            out.append(f" {human(n)}\n")
            label = " " * name_w
    return out


def terminal(s: dict, table: bool = True) -> Group:
    """For `fetchtool savings` (summary, per-client table, chart) and `analyze` (summary and chart)."""
    parts = [Panel("\n".join(summary_lines(s)), title="Savings with incremental fetch sessions (KIP-227)",
                   expand=False)]
    if s.get("per_client"):
        if table:
            parts.append(client_table(s))
        parts.append(Panel(chart(s), title="actual vs incremental bytes per client", expand=False))
    return Group(*parts)


def markdown(s: dict) -> list[str]:
    """The `## Savings` section of the Markdown report."""
    out = ["## Savings with incremental fetch sessions (KIP-227)", ""]
    out += [f"- {line}" for line in summary_lines(s)]
    clients = s.get("per_client", [])
    if clients:
        out += ["", "| client | exchanges | actual | full | incremental | records | saved | % of metadata | saved/h "
                    "| realised | potential | lost | excess |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in clients:
            out.append("| " + " | ".join(str(x).replace("|", "\\|") for x in (
                _label(c), c["exchanges"], c["actual_bytes"], c["full_bytes"], c["incremental_bytes"],
                c["records_bytes"], c["saved_bytes"], pct(c["saved_share_of_metadata"]),
                human(c["saved_bytes_per_hour"]), c["realised_bytes"], c["potential_bytes"], c["lost_bytes"],
                c["excess_bytes"])) + " |")
    brokers = s.get("per_broker", [])
    if brokers:
        out += ["", "| broker | exchanges | actual | incremental | saved | saved/h |", "|---|---|---|---|---|---|"]
        for b in brokers:
            out.append(f"| {b['broker']} | {b['exchanges']} | {b['actual_bytes']} | {b['incremental_bytes']} | "
                       f"{b['saved_bytes']} | {human(b['saved_bytes_per_hour'])} |")
    return out
