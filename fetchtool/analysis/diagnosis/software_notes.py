"""What the capture says about each client's software, added to the findings once the whole capture is read:
whether a sessionless client implements KIP-227 at all, and which published bug of its software (at its
version) produces the finding's pattern (known_bugs). Run after both engines' analyses (embedded and Spark), so
the software one connection named reaches the client's other connections.
"""

from __future__ import annotations

from dataclasses import replace

from fetchtool.analysis.diagnosis.client_software import (GIVES_UP, NO, YES, Software, Support, after_refusal, parse,
                                                          sessions_support)
from fetchtool.analysis.diagnosis.known_bugs import match
from fetchtool.analysis.diagnosis.session_use import AFTER_REFUSAL
from fetchtool.analysis.model import ClientSummary, Finding
from fetchtool.analysis.tracking.tracker import host_of


def software_by_client(clients, report) -> dict[tuple[str, str | None], str]:
    """(host, client id) -> "name/version": from the client's Fetch connections, else from another connection
    of the same host that named itself under the same client id (ApiVersions on a bootstrap connection)."""
    out: dict[tuple[str, str | None], str] = {}
    if report is not None:
        for address, software in report.client_software.items():
            out.setdefault((host_of(address), report.software_client_ids.get(address)), software)
    for c in clients:
        if c.software:
            out[(c.host, c.client_id)] = c.software[0]
    return out


def support_sentence(software: str | None, refused: bool = False) -> str:
    """SESSIONLESS_CLIENT's sentence about the client's software; `refused`: its sessionless fetches followed a
    refused session (the after_refusal cause), so its configuration is not where to look."""
    if not software:
        return "The capture does not name its client software (no ApiVersions v3+ from it)."
    sw = parse(software)
    support = sessions_support(sw) if sw is not None else None
    if support is None or support.answer not in (YES, NO):
        return f"Its client software, {software}, is not known to fetchtool to implement KIP-227 or not."
    if support.answer == NO:
        return (f"Its client software, {software}, does not implement KIP-227 fetch sessions ({support.note}; "
                f"{support.source}): expected of this client, not a fault; a client with sessions would save this.")
    gives_up = _gives_up(sw)
    if refused:
        if gives_up:
            return (f"Its client software, {software}, implements KIP-227 ({support.note}), and {gives_up.note} "
                    f"({gives_up.source}).")
        return (f"Its client software, {software}, implements KIP-227 ({support.note}); fetchtool does not know "
                "whether it asks for a session again after a refusal.")
    if gives_up:  # a refusal before the capture began looks the same on the wire as sessions turned off
        return (f"Its client software, {software}, implements KIP-227 ({support.note}): check whether its sessions "
                f"are turned off in its configuration, or a broker refused it one before the capture began: "
                f"{gives_up.note} ({gives_up.source}).")
    return (f"Its client software, {software}, implements KIP-227 ({support.note}): check why this client fetches "
            "without a session (sessions turned off in its configuration?).")


def refusal_advice(software: str | None) -> str | None:
    """CACHE_FULL's advice for a client whose software gives up asking once refused: a restart is needed."""
    gives_up = _gives_up(parse(software))
    if gives_up is None:
        return None
    return (f"This client, {software}, will not ask again: {gives_up.note} ({gives_up.source}); restart it once "
            "the cache has room.")


def _gives_up(sw: Software | None) -> Support | None:
    """What the software does once refused a session (client_software.AFTER_REFUSAL), when that is giving up."""
    behaviour = after_refusal(sw) if sw is not None else None
    return behaviour if behaviour is not None and behaviour.answer == GIVES_UP else None


def annotate(findings: tuple[Finding, ...], clients: tuple[ClientSummary, ...], report) -> tuple[Finding, ...]:
    software = software_by_client(clients, report)
    out = []
    for f in findings:
        sw = software.get((host_of(f.client), f.client_id)) if f.client else None
        message, advice = f.message, f.advice
        if f.code == "SESSIONLESS_CLIENT":
            message = f"{message} {support_sentence(sw, refused=f.cause == AFTER_REFUSAL)}"
        elif f.code == "CACHE_FULL" and (restart := refusal_advice(sw)):
            advice = f"{advice} {restart}"
        bugs = match(f.code, f.cause, sw)
        if bugs:
            advice = f"{advice} This {' and '.join(b.sentence().rstrip('.') for b in bugs)}."
        if (message, advice) != (f.message, f.advice) or bugs:
            f = replace(f, message=message, advice=advice, known_bugs=tuple(b.id for b in bugs))
        out.append(f)
    return tuple(out)
