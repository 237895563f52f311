"""A single-sequence speculative loop in the classic style, called as written: one prompt in, its tokens out.

Loops copied across the field (feifeibear/LLMSpeculativeSampling's ``speculative_sampling``, romsto/
Speculative-Decoding's ``speculative_generate``, many papers' reference code) take one prompt (a ``[1, P]`` tensor
or a list of ids), the two models under their own names, a token budget and a draft length, sample with the global
torch RNG, and return the prompt and its continuation, or the continuation alone. :func:`from_classic_loop` is the
decode-loop contract around such a function: each prompt row (its ``-1`` padding removed; an empty prompt is one
``-1``, where the checker's models read the law of the first token) is one call on a global
RNG forked and seeded from the contract's generator, and the first ``max_new_tokens`` new tokens are kept. The
models it is handed speak the HF convention (``model(input_ids, past_key_values=...)``, ``.logits``,
``.past_key_values``, ``.device``; see :mod:`specdec_check.models._hf_style`).
"""

from __future__ import annotations

import numpy as np
import torch

from ._common import AdapterSignatureError, draw_seeds, forked_global_rng, parameters_of

__all__ = ["from_classic_loop"]

#: The names each role goes by in the loops this adapter was written against (first match wins).
ROLE_NAMES = {
    "prompt": ("prefix", "input_ids", "inputs", "prompt", "x"),
    "draft": ("approx_model", "draft_model", "drafter", "small_model", "draft", "assistant_model"),
    "target": ("target_model", "target", "large_model", "model"),
    "max_new_tokens": ("max_len", "max_new_tokens", "max_gen_len", "gen_len", "max_tokens"),
    "gamma": ("gamma", "speculate_k", "num_speculative_tokens", "lookahead", "k"),
}


def _roles(params: list, names: dict, fn) -> dict:
    roles = {}
    for role, candidates in ROLE_NAMES.items():
        given = names.get(role)
        if given is not None:
            if given not in params:
                raise AdapterSignatureError(f"from_classic_loop: {role}={given!r} is not a parameter of "
                                            f"{getattr(fn, '__name__', fn)}{tuple(params)}.")
            roles[role] = given
            continue
        found = next((name for name in candidates if name in params), None)
        if found is None:
            raise AdapterSignatureError(
                f"from_classic_loop: no parameter of {getattr(fn, '__name__', fn)}{tuple(params)} is the {role} "
                f"(looked for {', '.join(candidates)}); name it: from_classic_loop(fn, {role}='<its name>').")
        roles[role] = found
    return roles


def _flat(result) -> list:
    if isinstance(result, tuple):  # (tokens, statistics), as romsto's returns
        result = result[0]
    return [int(t) for t in torch.as_tensor(result).reshape(-1).tolist()]


def _settles(flat: list, prompt: list, max_new_tokens: int):
    """What one row proves about a loop's return convention: ``"new"`` when it cannot be the whole sequence (it
    does not start with the prompt, or is too short to hold it and the new tokens), ``"sequence"`` when it can
    only be (an empty prompt's ``-1`` first: a continuation holds tokens only), else None (either reading fits)."""
    if flat[:len(prompt)] != prompt or len(flat) < len(prompt) + max_new_tokens:
        return "new"
    return "sequence" if prompt == [-1] else None


def from_classic_loop(fn, *, returns: str = "auto", prompt_as: str = "auto", names: dict | None = None, **fixed):
    """The decode-loop contract around a single-sequence loop ``fn``, run as written (see the module docstring).

    ``fn``'s parameters are found by name (:data:`ROLE_NAMES`; ``names={"draft": "ssm"}`` names one the table
    lacks); ``fixed`` keywords are passed on as they are (``temperature=1``, a logits processor, a stop token).
    ``prompt_as``: ``"tensor"`` (int64 ``[1, P]`` on the target's device), ``"list"`` (ids), or ``"auto"`` (a
    list when the prompt parameter is annotated ``List``/``list``, else a tensor). ``returns``: ``"sequence"``
    (the prompt and its continuation), ``"new"`` (the continuation), or ``"auto"``: settled by the first row
    that proves it (one that does not start with its prompt or is shorter than the prompt and ``max_new_tokens``:
    a continuation; an empty prompt's ``-1`` first: a sequence), rows before it that fit both readings read as
    a sequence. Name it for a loop that returns its continuation and may return more than ``max_new_tokens``. A row that ends before ``max_new_tokens`` keeps ``-1`` after its last token.

    Example (feifeibear/LLMSpeculativeSampling, as released)::

        from sampling import speculative_sampling
        report = check_generator(from_classic_loop(speculative_sampling), mode="quick")
    """
    if not callable(fn):
        raise TypeError(f"from_classic_loop needs a decode loop (a function); got {type(fn).__name__}.")
    if returns not in ("auto", "sequence", "new") or prompt_as not in ("auto", "tensor", "list"):
        raise ValueError(f"from_classic_loop: returns must be auto, sequence or new (got {returns!r}); prompt_as "
                         f"auto, tensor or list (got {prompt_as!r}).")
    params = parameters_of(fn, "from_classic_loop")
    roles = _roles(list(params), names or {}, fn)
    if prompt_as == "auto":
        annotation = str(params[roles["prompt"]].annotation).lower()
        prompt_as = "list" if "list" in annotation else "tensor"

    settled = [None if returns == "auto" else returns]  # the convention, once a row has proven it

    def generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
        rows = prompts.detach().cpu().numpy() if isinstance(prompts, torch.Tensor) else np.asarray(prompts)
        device = torch.device(getattr(target, "device", "cpu"))
        seeds = draw_seeds(generator, rows.shape[0]) if isinstance(generator, torch.Generator) else [
            int(s) for s in np.asarray(generator.integers(0, 1 << 62, size=rows.shape[0]))]
        out = np.full((rows.shape[0], max_new_tokens), -1, dtype=np.int64)
        for i, seed in enumerate(seeds):
            # an empty prompt: one -1, the checker's start of sequence (its models read the first law there)
            prompt = [int(t) for t in rows[i] if t >= 0] or [-1]
            given = prompt if prompt_as == "list" else torch.tensor([prompt], dtype=torch.int64, device=device)
            kwargs = {roles["prompt"]: given, roles["target"]: target, roles["draft"]: draft,
                      roles["max_new_tokens"]: int(max_new_tokens), roles["gamma"]: int(gamma), **fixed}
            with forked_global_rng(device, seed):
                flat = _flat(fn(**kwargs))
            if settled[0] is None:
                settled[0] = _settles(flat, prompt, int(max_new_tokens))
            # until a row proves it, a row that fits both readings is read as the whole sequence
            new = (flat[len(prompt):] if (settled[0] or "sequence") == "sequence" else flat)[:max_new_tokens]
            out[i, :len(new)] = new
        return torch.from_numpy(out).to(prompts.device) if isinstance(prompts, torch.Tensor) else out

    generate.__name__ = generate.__qualname__ = f"from_classic_loop({getattr(fn, '__name__', 'loop')})"
    return generate
