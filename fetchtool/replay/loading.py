"""The edge between capture files and the plan: decode, then plan."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from fetchtool.replay.plan import ReplayPlan, build_plan


def load_plan(paths: Sequence[Path], ports: Iterable[int] | None = None) -> tuple[ReplayPlan, list[str]]:
    """Decode the capture files and build their replay plan; returns the plan and the decode's warning lines.

    Missing, unreadable files and directories are the decoder's to judge, as for analyze and decode: each is a
    counted warning while another file can be read, the decoder's one-line CaptureError when none can."""
    import tempfile

    from fetchtool.decoder import decode_capture

    run = decode_capture([str(p) for p in paths], ports=list(ports) if ports else None)
    with tempfile.TemporaryFile(prefix="fetchtool-plan-") as spill:  # the plan's first pass spills partitions here
        plan = build_plan(run, spill)
    return plan, run.report.warning_lines()[:20]
