"""The defaults the command-line options show in their help, written out here so that a help screen need not
import the modules that own them to print four numbers: the session engine (fetchtool.sessions) and the analysis
model (fetchtool.analysis.shown) cost `fetchtool --help` a fifth of its time. tests/cli/test_startup.py checks
each against its owner."""

CACHE_SLOTS = 1000        # fetchtool.sessions.cache.DEFAULT_MAX_SLOTS: max.incremental.fetch.session.cache.slots
CACHE_SHARDS = 8          # fetchtool.sessions.cache.DEFAULT_SHARDS
EVICTION_MS = 120_000     # fetchtool.sessions.cache.DEFAULT_EVICTION_MS
SESSIONS_LISTED = 1000    # fetchtool.analysis.shown.DEFAULT_SESSIONS: sessions a report lists
