"""From what was tracked to findings: causes, the shadow cache replay, advice."""
