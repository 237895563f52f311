"""The generator kind: a whole speculative decode loop run against exactly enumerated Markov models."""
