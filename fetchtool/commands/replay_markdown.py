"""simulate and replay as markdown, to paste into a ticket: the JSON reports' numbers in tables."""

from __future__ import annotations

from fetchtool.commands.wording import count
from fetchtool.printable import one_line

TOTALS = ("requests", "sessions created", "evictions", "70", "71", "other errors", "incremental", "request MB",
          "response MB")


def _row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _head(cols) -> list[str]:
    return [_row(cols), _row(["---"] * len(cols))]


def _totals(label: str, t: dict) -> str:
    errors = t.get("errors", {})
    other = sum(n for code, n in errors.items() if code not in ("70", "71", "106"))
    return _row([label, f"{t['requests']:,}", f"{t['sessions_created']:,}", f"{t.get('evictions', 0):,}",
                 f"{errors.get('70', 0):,}", f"{errors.get('71', 0):,}", f"{other:,}",
                 f"{t['incremental_share']:.0%}", f"{t['request_bytes'] / 1e6:,.2f}",
                 f"{t['response_bytes'] / 1e6:,.2f}"])


def _config(c: dict) -> str:
    return f"{c['cache_slots']:,} slots / {c['cache_shards']} shards / {c['eviction_ms'] / 1000:g} s"


def simulate_markdown(doc: dict) -> str:
    plan = doc["plan"]
    out = ["# Simulated fetch session cache", "",
           f"{count(plan['requests'], 'fetch')} in {count(plan['streams'], 'client stream')} over "
           f"{plan['duration_s']:,.1f} s, replayed against each configuration in memory.", "",
           "## Totals", ""] + _head(["configuration", *TOTALS])
    out.append(_totals("captured", doc["captured"]))
    out += [_totals(_config(c), c["totals"]) for c in doc["configs"]]
    out += ["", "## Clients: errors 70/71 and sessions created", ""]
    out += _head(["client", "broker", "behaviour", "captured", *(_config(c) for c in doc["configs"])])
    for i, client in enumerate(doc["configs"][0]["clients"] if doc["configs"] else []):
        cells = [_cell(client["captured"])] + [_cell(c["clients"][i]) for c in doc["configs"]]
        who = f"{client['client']} ({one_line(client['client_id'])})" if client["client_id"] else client["client"]
        out.append(_row([who, client["broker"], client["behaviour"], *cells]))
    return "\n".join(out) + "\n"


def _cell(t: dict) -> str:
    e = t.get("errors", {})
    return f"{e.get('70', 0):,}/{e.get('71', 0):,}, {count(t['sessions_created'], 'session')}"


def replay_markdown(doc: dict) -> str:
    state = "interrupted, partial" if doc["interrupted"] else "complete" if doc["finished"] else "partial"
    speed = doc["speed"] if isinstance(doc["speed"], str) else f"speed {doc['speed']:g}"
    out = ["# Replay", "",
           f"Against {doc['target']} ({state}): {count(doc['totals']['requests'], 'request')} in "
           f"{doc['elapsed_s']:,.1f} s, {speed}, sessions {doc['sessions']}.", "",
           "## Totals", ""] + _head(["", *TOTALS])
    out += [_totals("captured", doc["captured"]), _totals("replay", doc["totals"]), ""]
    out += ["## Clients", ""] + _head(["client", "broker", "behaviour", "sent", "answered", "sessions",
                                       "errors (replay)", "errors (captured)"])
    for c in doc["clients"]:
        who = f"{c['client']} ({one_line(c['client_id'])})" if c["client_id"] else c["client"]
        out.append(_row([who, c["broker"], c["behaviour"], f"{c['requests']:,}", f"{c['responses']:,}",
                         f"{c['sessions_established']:,}", _codes(c["errors"]), _codes(c["captured"]["errors"])]))
    if doc["divergence"]:
        out += ["", "## Divergence from the capture", ""] + _head(["client", "broker", "error", "captured",
                                                                     "replay"])
        out += [_row([d["client"], d["broker"], d["error"], d["captured"], d["replay"]]) for d in doc["divergence"]]
    else:
        out += ["", "No divergence: the replay got the same errors as the capture, client by client."]
    if doc["notes"]:
        out += ["", "## Notes", ""] + [f"- {note}" for note in doc["notes"]]
    return "\n".join(out) + "\n"


def _codes(errors: dict) -> str:
    return ", ".join(f"{code}x{n:,}" for code, n in errors.items()) or "-"
