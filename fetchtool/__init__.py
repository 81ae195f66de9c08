"""fetchtool: analyse and replay Apache Kafka Fetch traffic (KIP-227 sessions, KIP-74 limits, KIP-630 snapshots)."""

__version__ = "0.1.0"

# The version of the machine-readable contracts (decode JSONL keys, analyze / sessions / savings / simulate /
# replay JSON; design.md). Bump the minor for added keys, the major for a key removed or changed in meaning.
# 1.1: fetchtool_version / contract_version in every report, decode's latency_ms, sessions --format json.
CONTRACT_VERSION = "1.1"


def tool_version() -> str:
    """The installed package's version (what pip says), or __version__ when run from a source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fetchtool")
    except PackageNotFoundError:
        return __version__
