"""One module per CLI command; each exposes `main`, registered by fetchtool.cli."""
