"""Rendering the `savings` object (SavingsResult.to_json()): rich table + bar chart, and Markdown.

Works on the JSON dict so `analyze` reports and `fetchtool savings` show the same figures.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.cells import cell_len
from rich.text import Text

from fetchtool.analysis.reports.fit import Col, Fit
from fetchtool.analysis.shown import ADDRESSES_SHOWN
from fetchtool.analysis.reports.units import count, human, more_or_less
from fetchtool.printable import one_line

BAR = 40
BAR_MIN = 10  # narrowest bar that still shows a difference
# lost_by_cause keys as a sentence names them (the JSON keeps the keys)
CAUSES = {"cache_full": "refused, cache full", "not_granted": "refused by a broker that keeps no sessions",
          "session_start": "first full fetches", "70": "FETCH_SESSION_ID_NOT_FOUND",
          "71": "INVALID_FETCH_SESSION_EPOCH", "106": "FETCH_SESSION_TOPIC_ID_ERROR",
          "churn": "new sessions never used", "close": "closed sessions"}


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _label(c: dict) -> str:
    """As analyze's Clients table names a client: client id@host (its connections are listed apart)."""
    return f"{one_line(c.get('client_id') or '?')}@{c.get('host') or c['client']}"


def _connections(c: dict) -> tuple[str, ...]:
    """The first ADDRESSES_SHOWN connections and how many more (a client of 100,000 connections)."""
    addresses = c.get("addresses") or [c["client"]]
    shown = tuple(addresses[:ADDRESSES_SHOWN])
    more = c.get("addresses_total", len(addresses)) - len(shown)
    return (*shown, f"(+{more:,} more)") if more > 0 else shown


def excess_text(t: dict) -> str:
    """The part of the saving that working sessions still carry (savings.py: the categories add up to it)."""
    excess = t.get("excess_bytes") or 0
    req, resp = t.get("excess_request_bytes") or 0, t.get("excess_response_bytes") or 0
    if not (excess or req or resp):
        return ""
    return (f"; working sessions carry {more_or_less(excess)} than their incremental equivalent (requests "
            f"{more_or_less(req)}: unchanged partitions resent; responses {more_or_less(resp)})")


def _lost(cause: str, n: int) -> str:
    # negative: that cause's fetches were smaller than a working session's would have been
    return f"{CAUSES.get(cause, cause)}: {human(n)}" if n >= 0 else f"{CAUSES.get(cause, cause)}: {human(-n)} fewer"


def _saving(t: dict, per_hour: str) -> str:
    saved = t["saved_bytes"]
    if saved < 0:  # the capture already sends less than the model's working sessions would
        return f"that is {human(-saved)}{per_hour} more than the capture's fetches, so nothing to save."
    return (f"saving {human(saved)}{per_hour} = {pct(t['saved_share_of_metadata'])} of the metadata bytes, "
            f"{pct(t['saved_share_of_all'])} of all fetch bytes.")


def _failing(n: int) -> str:
    if n >= 0:
        return f"failing sessions lose {human(n)}"
    return f"failing sessions sent {human(-n)} less than working ones"


def _potential(n: int) -> str:
    if n >= 0:
        return f"Sessionless clients could save {human(n)}"
    return f"Sessionless clients would send {human(-n)} more with sessions (a session starts with a full fetch)"


def summary_lines(s: dict) -> list[str]:
    """A few sentences a support engineer can paste into a ticket."""
    t = s.get("total") or {}
    if not t.get("exchanges"):
        return ["No Fetch exchanges to estimate."]
    hours = t.get("saved_bytes_per_hour")
    per_hour = f" ({human(abs(hours))}/h of capture time)" if hours is not None else ""
    lines = [
        f"{count(t['exchanges'], 'Fetch exchange')}: {human(t['actual_bytes'])} on the wire, of which "
        f"{human(t['records_bytes'])} records and {human(t['metadata_bytes'])} fetch metadata.",
        f"With working incremental fetch sessions: {human(t['incremental_bytes'])}; " + _saving(t, per_hour),
        f"Already saved by sessions that work: {human(t['realised_bytes'])}. {_potential(t['potential_bytes'])}"
        f"; {_failing(t['lost_bytes'])}"
        + (" (" + ", ".join(_lost(k, v) for k, v in t["lost_by_cause"].items() if v) + ")"
           if any(t["lost_by_cause"].values()) else "") + excess_text(t) + ".",
    ]
    proj = t.get("projection") or {}
    if proj:
        lines.append("Same workload with more partitions and the same change rate: " + "; ".join(
            f"{k}: {human(p['actual_bytes'])} now vs {human(p['incremental_bytes'])} with sessions"
            for k, p in proj.items()) + ".")
    lines += list(s.get("notes") or [])
    return lines


CLIENT_COLS = (Col("client"), Col("connections"), Col("fetches", right=True), Col("actual", right=True),
               Col("full", right=True), Col("incr.", right=True), Col("saved", right=True),
               Col("% meta", right=True), Col("lost", right=True))


def client_table(s: dict, limit: int = 30) -> Fit:
    """A few columns (cards when they do not fit); the JSON has every other figure."""
    rows = [(_label(c), _connections(c), f"{c['exchanges']:,}", human(c["actual_bytes"]), human(c["full_bytes"]),
             human(c["incremental_bytes"]), human(c["saved_bytes"]), pct(c["saved_share_of_metadata"]),
             human(c["lost_bytes"])) for c in s.get("per_client", [])[:limit]]
    return Fit("Per client: bytes as captured, as full fetches, and with working incremental sessions",
               CLIENT_COLS, rows)


class Chart:
    """Actual vs incremental bytes per client, as bars on one scale. Each client's name heads its bars on a line
    of its own when name and bar do not fit side by side, so a name (client id@host) is never cut."""

    def __init__(self, s: dict, limit: int = 20, width: int = BAR) -> None:
        self.clients, self.width = s.get("per_client", [])[:limit], width

    def __rich_console__(self, console, options):
        if not self.clients:
            return
        top = max(max(c["actual_bytes"], c["incremental_bytes"]) for c in self.clients) or 1
        name_w = max(cell_len(_label(c)) for c in self.clients)
        figure_w = max(len(human(c[k])) for c in self.clients for k in ("actual_bytes", "incremental_bytes"))
        side = name_w + 1 + 7 + BAR_MIN + 1 + figure_w <= options.max_width  # name beside its bars
        bar_w = max(BAR_MIN, min(self.width, options.max_width - (name_w + 1 if side else 2) - 8 - figure_w))
        out = Text()
        for c in self.clients:
            label = _label(c)
            if not side:
                out.append(label + "\n", style="bold")
            for what, key, style in (("actual", "actual_bytes", "red"), ("incr.", "incremental_bytes", "green")):
                n = c[key]
                out.append((label.ljust(name_w) + " ") if side else "  ")
                out.append(f"{what:>6} ")
                out.append(("█" * max(1 if n else 0, round(n / top * bar_w))).ljust(bar_w), style=style)
                out.append(f" {human(n)}\n")
                label = ""
        out.rstrip()
        yield out


def chart(s: dict, limit: int = 20, width: int = BAR) -> Chart:
    return Chart(s, limit, width)


def terminal(s: dict, table: bool = True) -> Group:
    """For `fetchtool savings` (summary, per-client table, chart) and `analyze` (summary and chart)."""
    parts: list[RenderableType] = [Panel("\n".join(summary_lines(s)), title="Savings with incremental fetch sessions (KIP-227)",
                   expand=False)]
    if s.get("per_client"):
        if table:
            parts.append(client_table(s))
        parts.append(Text("Actual vs incremental bytes per client", style="bold italic"))
        parts.append(chart(s))
    return Group(*parts)


def markdown(s: dict) -> list[str]:
    """The `## Savings` section of the Markdown report."""
    out = ["## Savings with incremental fetch sessions (KIP-227)", ""]
    out += [f"- {line}" for line in summary_lines(s)]
    clients = s.get("per_client", [])
    if clients:
        out += ["", "| client | connections | exchanges | actual | full | incremental | records | saved "
                    "| % of metadata | saved/h | realised | potential | lost | excess |", "|---" * 14 + "|"]
        for c in clients:
            out.append("| " + " | ".join(str(x).replace("|", "\\|") for x in (
                _label(c), ", ".join(_connections(c)), f"{c['exchanges']:,}", *(f"{c[k]:,}" for k in (
                    "actual_bytes", "full_bytes", "incremental_bytes", "records_bytes", "saved_bytes")),
                pct(c["saved_share_of_metadata"]), human(c["saved_bytes_per_hour"]),
                *(f"{c[k]:,}" for k in ("realised_bytes", "potential_bytes", "lost_bytes", "excess_bytes")))) + " |")
    brokers = s.get("per_broker", [])
    if brokers:
        out += ["", "| broker | exchanges | actual | incremental | saved | saved/h |", "|---|---|---|---|---|---|"]
        for b in brokers:
            out.append(f"| {b['broker']} | {b['exchanges']:,} | {b['actual_bytes']:,} | {b['incremental_bytes']:,} | "
                       f"{b['saved_bytes']:,} | {human(b['saved_bytes_per_hour'])} |")
    return out
