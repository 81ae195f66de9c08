"""Following the capture: sessions, clients, brokers and connections, one exchange at a time."""
