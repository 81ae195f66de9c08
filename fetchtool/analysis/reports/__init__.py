"""Rendering an Analysis: terminal, markdown, JSON and the savings panel."""
