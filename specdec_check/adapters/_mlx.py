"""mlx-lm's speculative decoding loop as written: ``mlx_lm.generate.speculative_generate_step``.

mlx-lm verifies by sampling the target at every drafted position and accepting a draft iff it equals the target's
sample (lossless: each committed token is a sample of the target's law). This adapter is the decode-loop contract
around it, on the user's own mlx models (``check_generator(from_mlx_generate(), target=model, draft=model)``; the
oracle is :func:`~specdec_check.models.from_mlx_model` of the target). mlx is imported when the adapter is made.
"""

from __future__ import annotations

import numpy as np

__all__ = ["from_mlx_generate"]


def from_mlx_generate(step=None, *, temperature: float = 1.0, **kwargs):
    """The decode-loop contract around mlx-lm's ``speculative_generate_step`` (``step``; default: the installed
    one): for each prompt row, ``mx.random.seed`` from the contract's generator, the row's real tokens as the
    prompt, ``num_draft_tokens = gamma``, ``max_tokens = max_new_tokens``, ``sampler = make_sampler(temp=
    temperature)`` (mlx-lm's own), other ``kwargs`` passed on (``logits_processors``, ``kv_bits``...). Each
    yielded token is kept, up to ``max_new_tokens``.

    Example::

        from mlx_lm import load
        target, _ = load("mlx-community/...-8B-4bit")
        draft, _ = load("mlx-community/...-0.5B-4bit")
        report = check_generator(from_mlx_generate(), target=target, draft=draft, mode="quick")
    """
    import mlx.core as mx

    if step is None:
        from mlx_lm.generate import speculative_generate_step as step
    from mlx_lm.sample_utils import make_sampler

    sampler = kwargs.pop("sampler", None) or make_sampler(temp=temperature)

    def generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
        rows = np.asarray(prompts)
        out = np.full((rows.shape[0], max_new_tokens), -1, dtype=np.int64)
        for i, row in enumerate(rows):
            mx.random.seed(int(generator.integers(0, 2**32)))
            prompt = mx.array([int(t) for t in row if t >= 0], mx.uint32)
            tokens = [int(token) for token, _, _ in step(prompt, target, draft, num_draft_tokens=int(gamma),
                                                          max_tokens=int(max_new_tokens), sampler=sampler, **kwargs)]
            out[i, :len(tokens[:max_new_tokens])] = tokens[:max_new_tokens]
        return out

    generate.__name__ = generate.__qualname__ = f"from_mlx_generate({getattr(step, '__name__', 'step')})"
    return generate
