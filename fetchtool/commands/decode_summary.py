"""decode's summary on stderr: what the decoder read, with the commands' wording (a count agrees with its noun)."""

from __future__ import annotations

from fetchtool.commands.wording import count
from fetchtool.protocol.headers import api_name


def summary_lines(report) -> list[str]:
    """DecodeReport.lines(), worded as every command's output is."""
    out = [
        f"files: {', '.join(report.files) or '-'}",
        f"packets: {report.packets:,}  bytes: {report.bytes:,}",
        f"connections: {report.connections:,} ({report.kafka_connections:,} Kafka)",
        f"exchanges: {report.exchanges:,} (responses missing: {report.responses_missing:,}, "
        f"responses without request: {report.orphan_responses:,})",
    ]
    if report.gaps:
        out.append(f"capture gaps: {report.gaps:,} ({report.lost_bytes:,} bytes lost, "
                   f"{report.skipped_bytes:,} bytes skipped to resynchronise)")
    for (k, v), n in sorted(report.requests.items()):
        out.append(f"  {api_name(k)} v{v} (key {k}): {count(n, 'request')}")
    for client, software in sorted(report.client_software.items()):
        out.append(f"  client {client}: {software}")
    out.extend(f"warning: {line}" for line in report.warning_lines())
    return out
