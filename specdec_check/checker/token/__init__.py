"""The token-sampler kind: temperature / top-k / top-p / min-p kernels against their exact processed laws."""
