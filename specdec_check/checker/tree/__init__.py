"""The tree kind: a token-tree verifier under one drafting scheme (iid, without_replacement, topk)."""
