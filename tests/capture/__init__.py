"""Capture-layer tests (reader, link layers, reassembly, writer)."""
