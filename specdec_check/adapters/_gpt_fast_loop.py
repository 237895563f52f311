"""gpt-fast's decode loop end to end: a model object with gpt-fast's interface, and its ``generate`` / ``speculative_decode`` as written."""

from __future__ import annotations

import types

import numpy as np
import torch

from ._common import AdapterSignatureError, draw_seeds, forked_global_rng, parameters_of, version_of

__all__ = ["from_gpt_fast_generate", "gpt_fast_models"]


class GptFastModel(torch.nn.Module):
    """The interface ``generate.py`` uses of gpt-fast's ``Transformer``, over a specdec_check causal model.

    ``setup_caches(max_batch_size, max_seq_length)`` allocates a token cache (gpt-fast: a KV cache,
    kept when already large enough); ``model(idx [B, S], input_pos [S])`` writes ``idx`` at the
    positions ``input_pos`` and returns float32 logits ``[B, S, V + 1]``: at each position, ``log p``
    after the cached tokens up to and including it (gpt-fast's causal mask ``causal_mask[input_pos]``
    reads exactly those), and ``-inf`` for the id ``V``, the BOS token that starts every prompt (read
    as start-of-sequence). Entries past a position, stale drafts included, are never read, as in
    gpt-fast. Each forward pass is one call of the law model (so a checker's counting wrapper counts it).
    """

    def __init__(self, laws, vocab_size: int, block_size: int = 1 << 16):
        super().__init__()
        self.laws, self.vocab_size = laws, int(vocab_size)
        self.config = types.SimpleNamespace(block_size=block_size, vocab_size=self.vocab_size + 1)
        self.tokens = None
        self.max_batch_size = self.max_seq_length = -1

    def setup_caches(self, max_batch_size, max_seq_length):
        if self.max_seq_length >= max_seq_length and self.max_batch_size >= max_batch_size:
            return
        self.max_batch_size, self.max_seq_length = int(max_batch_size), int(max_seq_length)
        self.tokens = torch.full((self.max_batch_size, self.max_seq_length), -1, dtype=torch.int64)

    def forward(self, idx, input_pos=None):
        if self.tokens is None:
            raise RuntimeError("Caches must be initialized first (setup_caches), as in gpt-fast.")
        idx = torch.as_tensor(idx).to(torch.int64).cpu()
        positions = torch.as_tensor(input_pos).reshape(-1).to(torch.int64).cpu()
        batch = idx.shape[0]
        self.tokens[:batch, positions] = idx
        last = int(positions.max())
        seen = self.tokens[:batch, :last + 1]
        real = torch.where(seen >= self.vocab_size, -1, seen)  # BOS -> start of sequence
        laws = self.laws(real)  # one counted call: the law after every prefix
        laws = torch.as_tensor(np.asarray(laws.cpu() if isinstance(laws, torch.Tensor) else laws), dtype=torch.float64)
        laws = laws[:, positions]
        logits = torch.where(laws > 0, laws.log(), torch.tensor(float("-inf"), dtype=torch.float64))
        bos = torch.full(logits.shape[:-1] + (1,), float("-inf"), dtype=torch.float64)
        return torch.cat([logits, bos], -1).to(torch.float32)


def gpt_fast_models(target, draft):
    """``(target_model, draft_model)`` with gpt-fast's ``Transformer`` interface (:class:`GptFastModel`) over
    specdec_check causal models (or a checker's counting wrappers of them)."""
    return GptFastModel(target, target.vocab_size), GptFastModel(draft, draft.vocab_size)


def _is_gpt_fast_module(model) -> bool:
    """A model with gpt-fast's own interface (its real ``Transformer``): handed to gpt-fast's code as it is."""
    return isinstance(model, torch.nn.Module) and callable(getattr(model, "setup_caches", None))


def _row_seeds(generator, n: int) -> list:
    if isinstance(generator, torch.Generator):
        return draw_seeds(generator, n)
    return [int(s) for s in np.asarray(generator.integers(0, 1 << 62, size=n))]


def _speculative_loop(speculative_decode, model, draft_model, prompt, max_new_tokens, speculate_k, sampling):
    """gpt-fast's single-sequence loop (``generate.py`` before its batched-generation commit 61c193d, e.g.
    bc04265), around the given ``speculative_decode`` and the ``prefill`` of the same module."""
    prefill = speculative_decode.__globals__.get("prefill")
    if prefill is None:
        raise AdapterSignatureError("from_gpt_fast_generate: speculative_decode's module has no prefill(); pass "
                                    "gpt-fast's generate instead.")
    T = prompt.size(0)
    T_new = T + max_new_tokens
    max_seq_length = T_new + speculate_k + 1
    with torch.device(prompt.device):  # as gpt-fast's generate makes its caches
        model.setup_caches(max_batch_size=1, max_seq_length=max_seq_length)
        draft_model.setup_caches(max_batch_size=1, max_seq_length=max_seq_length)
    seq = torch.empty(T_new, dtype=prompt.dtype, device=prompt.device)
    seq[:T] = prompt
    input_pos = torch.arange(0, T, device=prompt.device)
    next_token = prefill(model, prompt.view(1, -1), input_pos, **sampling).clone()
    prefill(draft_model, prompt.view(1, -1), input_pos, **sampling)
    seq[T] = next_token.reshape(())
    input_pos = T
    while input_pos < T_new - 1:
        cur_token = next_token.view(())
        next_tokens = speculative_decode(model=model, draft_model=draft_model, cur_token=cur_token,
                                         input_pos=input_pos, speculate_k=speculate_k, **sampling)
        num_added = min(T_new - input_pos - 1, len(next_tokens))
        seq[input_pos + 1: input_pos + num_added + 1] = next_tokens[:num_added]
        input_pos = input_pos + num_added
        next_token = next_tokens[-1]
    return seq


def from_gpt_fast_generate(fn, **sampling_kwargs):
    """The decode-loop contract around gpt-fast's ``generate`` (or ``speculative_decode``), run as written.

    ``fn`` is ``generate.py``'s ``generate`` (both signatures: ``(model, prompt, max_new_tokens, *,
    interactive, draft_model, speculate_k, ...)`` and, since the batched-generation commit 61c193d,
    ``(model, prompt, max_new_tokens, batch_size, *, ...)``) or its ``speculative_decode`` (then the
    loop around it is gpt-fast's single-sequence loop, with the module's own ``prefill``). The
    models: with ``check_generator(..., target=Transformer, draft=Transformer)`` (gpt-fast's real
    ``model.py``; the oracle is then :func:`~specdec_check.models.from_torch_module` of the target)
    the loop gets those models as they are and each prompt row's real tokens; on the checker's own
    models it gets :func:`gpt_fast_models` of them and BOS (the id ``V``) + the row's real tokens.
    Nothing of gpt-fast is replaced. For each prompt row: ``speculate_k = gamma``,
    ``sampling_kwargs`` passed on (gpt-fast's defaults: temperature 1, no top-k: the raw law), on
    the global torch RNG forked and seeded from the contract's generator; the ``max_new_tokens``
    tokens after the prompt are returned (int64 ``[B, max_new_tokens]``).

    gpt-fast is not a package: load ``generate.py`` from a checkout (it imports ``model`` and
    ``tokenizer`` from its folder). An unknown signature is an :class:`AdapterSignatureError`.

    Example::

        import sys; sys.path.insert(0, "gpt-fast")
        import generate as gpt_fast
        report = check_generator(from_gpt_fast_generate(gpt_fast.generate), mode="quick")
    """
    if not callable(fn):
        raise TypeError(f"from_gpt_fast_generate needs gpt-fast's generate or speculative_decode; got "
                        f"{type(fn).__name__}.")
    params = parameters_of(fn, "from_gpt_fast_generate")
    if {"model", "prompt", "max_new_tokens", "draft_model", "speculate_k"} <= set(params):
        kind = "generate"
    elif {"model", "draft_model", "cur_token", "input_pos", "speculate_k"} <= set(params):
        kind = "speculative_decode"
    else:
        raise AdapterSignatureError(f"from_gpt_fast_generate: {version_of(fn)}: {getattr(fn, '__name__', fn)}"
                                    f"{tuple(params)} is neither gpt-fast's generate nor its speculative_decode.")
    batched = "batch_size" in params

    def generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
        real = _is_gpt_fast_module(target) and _is_gpt_fast_module(draft)
        model, draft_model = (target, draft) if real else gpt_fast_models(target, draft)
        start = [] if real else [int(target.vocab_size)]  # the checker's models: BOS = id V starts each prompt
        weight = next(model.parameters(), None) if real else None
        device = weight.device if weight is not None else torch.device("cpu")
        is_torch = isinstance(prompts, torch.Tensor)
        rows = prompts.detach().cpu().numpy() if is_torch else np.asarray(prompts)
        out = np.full((rows.shape[0], max_new_tokens), -1, dtype=np.int64)
        for i, seed in enumerate(_row_seeds(generator, rows.shape[0])):
            prompt = torch.tensor(start + [int(t) for t in rows[i] if t >= 0], dtype=torch.int, device=device)
            with forked_global_rng(device, seed), torch.no_grad():
                if kind == "speculative_decode":
                    seq = _speculative_loop(fn, model, draft_model, prompt, int(max_new_tokens), int(gamma),
                                            sampling_kwargs)
                else:
                    extra = {"batch_size": 1} if batched else {}
                    result = fn(model=model, prompt=prompt, max_new_tokens=int(max_new_tokens), interactive=False,
                                draft_model=draft_model, speculate_k=int(gamma), **extra, **sampling_kwargs)
                    seq = result[0] if isinstance(result, tuple) else result
            new = torch.as_tensor(seq).reshape(-1)[prompt.shape[0]: prompt.shape[0] + max_new_tokens].cpu()
            out[i, :new.shape[0]] = new.to(torch.int64).numpy()
        return torch.from_numpy(out).to(prompts.device) if is_torch else out

    generate.__name__ = generate.__qualname__ = f"from_gpt_fast_generate({getattr(fn, '__name__', kind)})"
    return generate
