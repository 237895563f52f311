"""The checker core shared by every sampler kind: one scenario loop, one guarded call,
one policy table, one recorder, one session. Kinds live in sibling folders."""
