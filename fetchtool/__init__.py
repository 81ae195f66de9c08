"""fetchtool: analyse and replay Apache Kafka Fetch traffic (KIP-227 sessions, KIP-74 limits, KIP-630 snapshots)."""

import sys

__version__ = "0.1.0"

# The version of the machine-readable contracts (decode JSONL keys, analyze / sessions / savings / simulate /
# replay JSON; design.md). Bump the minor for added keys, the major for a key removed or changed in meaning.
# 1.1: fetchtool_version / contract_version in every report, decode's latency_ms, sessions --format json.
CONTRACT_VERSION = "1.1"


def hide_hypothesis() -> None:
    """Make hypothesis unimportable in this process (and the processes it forks), before kio is imported.

    kio registers hypothesis strategies for its types whenever hypothesis is importable: ~90 ms of every process's
    start-up, and a .hypothesis/ folder left in the working directory, the user's. fetchtool's own processes (the
    CLI, the Spark executors' Python workers, the Spark class-archive maker) never need them; its tests do."""
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def tool_version() -> str:
    """The installed package's version (what pip says), or __version__ when run from a source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fetchtool")
    except PackageNotFoundError:
        return __version__
