"""Decode loops on the user's own model pair, the target model as the oracle (issue 26)."""
