"""mlx-lm's real speculative loop (``mlx_lm.generate.speculative_generate_step``) on tiny mlx models built from a
config (no download), the target itself the oracle (issue 26). Skipped with the reason where mlx does not install."""

from __future__ import annotations

import inspect
import sys

import pytest

mx = pytest.importorskip("mlx.core", reason="mlx does not install here (mlx[cpu] needs Linux x86_64 or macOS arm64)")
pytest.importorskip("mlx_lm", reason="mlx-lm is not installed")

from mlx_lm.models import llama  # noqa: E402

from specdec_check import check_generator  # noqa: E402
from specdec_check.adapters import from_mlx_generate  # noqa: E402
from specdec_check.models import from_mlx_model  # noqa: E402


def tiny(scale: float):
    """A 2-layer Llama of mlx-lm's own model code; the draft is the target with a flatter head (drafts accepted
    often, but not always)."""
    mx.random.seed(0)
    model = llama.Model(llama.ModelArgs(model_type="llama", hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                                        num_attention_heads=2, rms_norm_eps=1e-5, vocab_size=32,
                                        tie_word_embeddings=False))
    model.lm_head.weight = model.lm_head.weight * scale
    mx.eval(model.parameters())
    return model


def _every_draft_accepted():
    """The installed ``speculative_generate_step`` with one line changed: a draft is accepted whatever the target
    sampled there (the draft's law leaks into the output)."""
    module = sys.modules["mlx_lm.generate"]
    source = inspect.getsource(module.speculative_generate_step)
    assert source.count("if tn != dtn:") == 1, "mlx-lm's acceptance line moved: update this mutant"
    namespace = dict(module.__dict__)
    exec(compile(source.replace("if tn != dtn:", "if False:"), module.__file__, "exec"), namespace)
    return namespace["speculative_generate_step"]


def test_the_mlx_oracle_is_the_uncached_forward_pass():
    import numpy as np

    target = tiny(8.0)
    laws = from_mlx_model(target).position_laws([(3, 1, 4, 1)])[0]
    logits = np.array(target(mx.array([[3, 1, 4, 1]])).astype(mx.float32), dtype=np.float64)[0]
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    assert laws.shape == (4, 32) and np.allclose(laws, expected / expected.sum(axis=1, keepdims=True))


def test_a_mutant_of_mlx_lms_loop_that_accepts_every_draft_fails():
    report = check_generator(from_mlx_generate(_every_draft_accepted()), target=tiny(8.0), draft=tiny(2.0),
                             max_new_tokens=4, mode="quick", seed=0)
    assert report.verdict == "failed", report.summary()
    assert {f.check for f in report.failures} & {"positions", "pairs", "first_token"}, report.summary()


@pytest.mark.slow  # mlx-lm's loop a row at a time: ~30 s
def test_mlx_lms_speculative_loop_is_exact_on_its_own_models_and_counts_target_passes():
    report = check_generator(from_mlx_generate(), target=tiny(8.0), draft=tiny(2.0), max_new_tokens=4, mode="quick",
                             seed=0)
    assert report.verdict == "passed", report.summary()
    calls = report.scenarios[0].target_calls_per_token
    # counted through the proxy the loop is handed: the prefill and one pass per step, over 4 tokens a row
    assert calls is not None and 0.5 < calls < 2
