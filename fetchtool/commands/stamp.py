"""Which fetchtool made a report: the same two facts in every JSON and markdown report a command writes, so a
ticket the report is attached to can say what made it."""

from __future__ import annotations

from fetchtool import CONTRACT_VERSION, tool_version


def versions() -> dict:
    return {"fetchtool_version": tool_version(), "contract_version": CONTRACT_VERSION}


def stamp_json(doc: dict) -> dict:
    """The report with the versions first: extension keys, every existing key kept as it was."""
    return {**versions(), **{k: v for k, v in doc.items() if k not in ("fetchtool_version", "contract_version")}}


def made_by() -> str:
    v = versions()
    return f"Made by fetchtool {v['fetchtool_version']} (report contract {v['contract_version']})."


def stamp_markdown(text: str) -> str:
    """The markdown report with a closing line naming the versions."""
    return text.rstrip("\n") + f"\n\n---\n_{made_by()}_\n"
