"""The ragged kind: the production logits-in, flattened-batch verifier layout (vLLM v1 style)."""
