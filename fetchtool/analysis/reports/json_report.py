"""The `analyze --format json` report (design.md contract: capture, brokers, clients, sessions, findings, savings)."""

from __future__ import annotations

import json

from fetchtool.analysis.model import Analysis


def render(analysis: Analysis) -> str:
    return json.dumps(analysis.to_json(), indent=2, sort_keys=False) + "\n"
