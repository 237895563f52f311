"""The chain kind: a single-path verifier ``verify(target_probs, draft_probs, draft_tokens, ...)``."""
