"""fetchtool's Kafka-protocol broker: in-memory logs, Fetch through the KIP-227 session engine.

Embedding: `Broker(BrokerConfig(port=0), topics={...}, clock=..., speed=...)` with `await start()` / `stop()`,
or `BrokerThread(...)` for synchronous callers. `BrokerCore` is the sans-IO request handler underneath.
`BrokerConfig(session_id_source=...)` makes the broker draw its fetch session ids from a given random.Random
(a replay uses it to hand out the captured ids); `session_seed` just seeds the default one.
"""

from fetchtool.broker.background import BrokerThread
from fetchtool.broker.handler import BrokerCore
from fetchtool.broker.server import Broker
from fetchtool.broker.state import BrokerConfig

__all__ = ["Broker", "BrokerConfig", "BrokerCore", "BrokerThread"]
