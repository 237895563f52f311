"""Where a sampler runs: the backend protocol and the numpy backend.

A backend hands the sampler its inputs (in the sampler's array world), gives it a generator,
and brings its outputs back. Backends that declare ``counts_on_device`` also let the checker
parse, transform and count outputs where the sampler left them (:meth:`Backend.on_device` and
the methods after it); only counts then cross to the host. :func:`make_backend` in
:mod:`._backends` builds one by name.
"""

from __future__ import annotations

import contextlib
import hashlib

import numpy as np

from .seeding import generators

__all__ = ["Backend", "NumpyBackend", "fingerprint_weights"]

#: Fingerprint weights per row length: one fixed random vector each (seeded by the length).
_WEIGHTS: dict = {}


def fingerprint_weights(length: int, dtype=np.float64) -> np.ndarray:
    """A fixed random vector of ``length`` entries in ``dtype`` (float64 or float32): ``rows @ w``
    changes when any entry of a row changes (except on a set of measure zero, and for float32 rows
    by more than the rounding of a float32 dot product), at the cost of one matrix-vector product."""
    key = (length, np.dtype(dtype).str)
    if key not in _WEIGHTS:
        _WEIGHTS[key] = np.random.default_rng([0xF1, length]).standard_normal(length).astype(dtype)
    return _WEIGHTS[key]


#: Past this many bytes, an array of 64-bit words is reduced to one word before it is hashed: each word goes
#: through a bijective mixer (the splitmix64 finalizer, Steele, Lea & Flood 2014), then the mixed words are summed
#: with fixed odd weights. A change of any word changes its mixed word by a pseudo-random amount, so one change
#: always moves the sum (an odd weight has an inverse mod 2^64) and several cancel with probability ~2^-64; without
#: the mixer, structured writes cancel (two float64 sign flips change two words by 2^63 each: negating an array of
#: even length left the sum unchanged). blake2b reads ~0.5 GB/s: a token call of 2^20 outputs hashed its row digests
#: and top_k (8 MB each) in 15 ms each.
WORDS_DIGEST_BYTES = 1 << 20
_MIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _words_digest(array: np.ndarray) -> bytes:
    """One 64-bit word of a contiguous array of 64-bit items (see :data:`WORDS_DIGEST_BYTES`)."""
    words = array.reshape(-1).view(np.uint64)
    key = ("odd", words.size)
    weights = _WEIGHTS.get(key)
    if weights is None:
        weights = _WEIGHTS[key] = np.random.default_rng([0xF2, words.size]).integers(
            0, 2**64, size=words.size, dtype=np.uint64, endpoint=False) | np.uint64(1)
    mixed = words ^ (words >> np.uint64(30))
    mixed *= _MIX[0]
    mixed ^= mixed >> np.uint64(27)
    mixed *= _MIX[1]
    mixed ^= mixed >> np.uint64(31)
    mixed *= weights
    return mixed.sum(dtype=np.uint64).tobytes()


#: Inputs of at most this many bytes are fingerprinted by their bytes themselves: the calls of a few rows hand over
#: less, where the product, the finiteness test and the hash below cost about 10 us and the bytes 1 to 2 us.
RAW_FINGERPRINT_BYTES = 1 << 14


def _digest(array: np.ndarray) -> bytes:
    """16 bytes of an array's content (shape and dtype included where the words are summed first)."""
    array = np.ascontiguousarray(array)
    if array.nbytes > WORDS_DIGEST_BYTES and array.dtype.itemsize == 8 and array.dtype.kind in "fiuc":
        head = f"{array.dtype.str}{array.shape}".encode()
        return hashlib.blake2b(head + _words_digest(array), digest_size=16).digest()
    return hashlib.blake2b(array.tobytes(), digest_size=16).digest()


class Backend:
    """Interface between the checker (float64 numpy laws) and the sampler's array world."""

    name: str = "abstract"
    device: str | None = None
    dtype: str = "float64"
    #: Relative/absolute slack of impossible-event checks for this dtype.
    tolerance: float = 0.0
    #: Whether writes into the inputs raise (numpy read-only views): no snapshot is needed to see them.
    read_only_inputs: bool = False
    #: Whether the inputs handed over share memory with the checker's draw (numpy views): a write then
    #: persists into later calls on the same draw, so a block's fingerprint can be checked once at its end.
    shares_inputs: bool = False
    #: Whether :meth:`law_rows` changes rows (a cast); when False scenarios skip it.
    casts_rows: bool = True
    #: Whether outputs are parsed, PIT-transformed and counted where the sampler left them.
    counts_on_device: bool = False

    # -- what every backend provides ---------------------------------------------------------------
    def running(self):
        """A context manager for the whole run (settings the backend needs while the sampler is called);
        none by default."""
        return contextlib.nullcontext()

    def generator(self, seed: int):
        """A fresh generator for the sampler, seeded with ``seed``."""
        raise NotImplementedError

    def law_rows(self, rows: np.ndarray) -> np.ndarray:
        """The float64 law of ``rows`` as the sampler will see them (after any cast)."""
        raise NotImplementedError

    def prepares_generators(self, count: int) -> bool:
        """Whether the generators of ``count`` calls are made together (:meth:`prepare_generators`); when not, their
        seeds are drawn one at a time, as the calls come."""
        return False

    def prepare_generators(self, seeds: list) -> None:
        """The generators of the next calls' ``seeds`` may be made together here; :meth:`generator` then hands each
        out once (a backend that makes them one at a time does nothing)."""

    def discard_generators(self, seeds: list) -> None:
        """Forget the prepared generators of ``seeds`` not handed out."""

    def law_model(self, model):
        """The model whose float64 laws are those the sampler sees on this backend (after any cast)."""
        return model

    def verifier_inputs(self, draft_token_ids, draft_probs, target_probs) -> dict:
        """Keyword arguments of a verifier call, minus ``generator``."""
        raise NotImplementedError

    def models(self, target, draft):
        """``(target, draft)`` as the decode loop receives them."""
        raise NotImplementedError

    def prompts(self, prompts: np.ndarray):
        """Prompts in the backend's form."""
        raise NotImplementedError

    def to_host(self, output) -> np.ndarray:
        """The sampler's output as a numpy array (int64 for integer outputs)."""
        raise NotImplementedError

    def copy(self, value):
        """An independent copy of an input or output (the sampler may reuse or rewrite its buffers)."""
        return np.array(value, copy=True)

    def same(self, a, b) -> bool:
        """Whether two inputs hold the same values (shape, dtype, NaN equal to NaN)."""
        return a.shape == b.shape and np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)

    def fingerprint(self, value) -> bytes:
        """A digest of an input's content: small arrays their bytes (:data:`RAW_FINGERPRINT_BYTES`), float arrays
        through ``rows @ w`` (:func:`fingerprint_weights`), integer arrays byte for byte. One pass, no copy; a write
        into the input changes it."""
        array = np.asarray(value)
        if array.nbytes <= RAW_FINGERPRINT_BYTES:  # its own bytes, with its dtype and shape: exact and cheap
            if array.dtype.kind in "fc":
                array = array + 0.0  # -0.0 as 0.0, as the product below sees it (a copy: the input is untouched)
            return f"{array.dtype.str}{array.shape}".encode() + array.tobytes()
        if array.dtype.kind == "f" and array.ndim and array.shape[-1]:
            # float32 rows in float32 (no float64 copy: 10x faster at V = 32,000), others in float64.
            weights = fingerprint_weights(array.shape[-1], np.float32 if array.dtype == np.float32 else np.float64)
            rows = array.reshape(-1, array.shape[-1])
            with np.errstate(invalid="ignore", over="ignore"):
                array = rows @ weights
            odd = ~np.isfinite(array)
            if odd.any():  # a row with -inf (masked logits) or NaN sums to a non-number: hash those rows whole
                return hashlib.blake2b(array.tobytes() + np.ascontiguousarray(rows[odd]).tobytes(),
                                       digest_size=16).digest()
        return _digest(array)

    # -- the device protocol (backends with counts_on_device) --------------------------------------
    def on_device(self, output) -> bool:
        """Whether ``output`` can be checked where it is (an integer array on this backend's device)."""
        return False

    def parse_on_device(self, output, draft_token_ids, vocab_size: int):
        """The decoded step (:class:`~specdec_check.checker.chain.contract.ParsedStep` of device arrays) of a
        well-formed ``output``, or None (the host path then names the problem)."""
        raise NotImplementedError

    def to_device(self, array: np.ndarray):
        """A numpy law or index array on the device (float64 laws, int64 indices)."""
        raise NotImplementedError

    def uniforms(self, seed: int):
        """``draw(n)``: float64 Uniform(0, 1) arrays on the device, from a generator seeded with ``seed``."""
        raise NotImplementedError

    def encode_on_device(self, output, vocab_size: int):
        """Integrated step-law codes (:func:`specdec_check.exact.encode_emitted`) of well-formed outputs, on the device."""
        raise NotImplementedError


class NumpyBackend(Backend):
    """float64 numpy arrays and a ``numpy.random.Generator`` (PCG64)."""

    name = "numpy"
    dtype = "float64"
    tolerance = 0.0  # the sampler sees exactly the float64 rows the laws are computed from
    casts_rows = False
    #: Inputs are handed over as read-only views: a write raises inside the verifier (no copy needed).
    read_only_inputs = True
    shares_inputs = True

    #: Seeds from which prepared generators are made together: below, one at a time costs less than the vectorised
    #: hashing's fixed ~180 us (14 us a generator at 16 seeds against 13 us one at a time; 6 us at 64).
    PREPARE_MIN_SEEDS = 16

    def __init__(self):
        self._prepared = {}  # seed -> its generator, made by prepare_generators, handed out once

    def generator(self, seed: int):
        prepared = self.__dict__.get("_prepared")  # (a subclass's __init__ may not have called this one's)
        if prepared:
            made = prepared.pop(seed, None)
            if made is not None:
                return made
        return np.random.Generator(np.random.PCG64(seed))

    def prepares_generators(self, count: int) -> bool:
        return count >= self.PREPARE_MIN_SEEDS

    def prepare_generators(self, seeds) -> None:
        """``PCG64`` generators of many seeds made together (:mod:`.seeding`: the same generators, draw for draw;
        their ``bit_generator.seed_seq`` is a :class:`~.seeding.SeedWords` standing for ``SeedSequence(seed)``)."""
        if self.prepares_generators(len(seeds)):
            self.__dict__.setdefault("_prepared", {}).update(zip(seeds, generators(seeds)))

    def discard_generators(self, seeds) -> None:
        prepared = self.__dict__.get("_prepared")
        if prepared:
            for seed in seeds:
                prepared.pop(seed, None)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_prepared"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._prepared = {}

    def law_rows(self, rows):
        return rows

    def verifier_inputs(self, draft_token_ids, draft_probs, target_probs):
        # Read-only views cost nothing, and a verifier that writes into its inputs can neither
        # corrupt the checker's laws nor hide the write: numpy raises at the write.
        views = {}
        for name, array in (("draft_token_ids", draft_token_ids), ("draft_probs", draft_probs),
                            ("target_probs", target_probs)):
            view = array.view()
            view.setflags(write=False)
            views[name] = view
        return views

    def to_host(self, output):
        return output if isinstance(output, np.ndarray) else np.asarray(output)

    def models(self, target, draft):
        return target, draft

    def prompts(self, prompts):
        return prompts
