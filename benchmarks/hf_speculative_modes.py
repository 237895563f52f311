"""Which of the installed transformers' speculative modes are lossless under ``do_sample=True``, measured.

Each mode runs on a tiny random Llama pair built from a config (no download; the draft is the target with a
flatter head, or a second model over another tokenizer), through ``from_hf_generate``, checked by
``check_generator`` against the target's own uncached forward pass with the same processing (top-k 3), in quick
mode, seed 0. Prints a markdown table (mode, generator class, verdict, rows, seconds, the weakest achieved TV,
the first token's plug-in TV, target calls per token) that ``reports/transformers-speculative-modes.md`` keeps::

    python benchmarks/hf_speculative_modes.py [--max-new-tokens 2]

Besides the installed code as it is, three edits show that the check sees what it should: transformers #47932
reintroduced in assisted generation (a mutant: must fail), and universal assisted generation with its pruned-head
logits placed by the candidate ids' own map, and the Gemma 4 assistant's argmax drafts with q their point mass
(the fixes: must pass). Exits 1 when a run contradicts its expectation.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fixtures():
    """The suite's tiny models and tokenizers (tests/adapters/test_real_models.py), one definition for both."""
    spec = importlib.util.spec_from_file_location("real_models", ROOT / "tests" / "adapters" / "test_real_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _patched(owner, name, value):
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


def _raw_q(self, generation_args):
    """transformers #47932 reintroduced: drafts sampled from processed scores, the raw logits returned as q."""
    import torch

    out = self.assistant_model.generate(**generation_args, **self.assistant_kwargs, output_logits=True)
    self.assistant_kwargs["cache"] = out.cache
    return out.sequences, torch.stack(out.logits, dim=1)


def _accept_every_draft(candidate_input_ids, candidate_logits, candidate_length, new_logits, *args, **kwargs):
    """``_speculative_sampling`` that accepts every draft and adds the target's bonus token (a mutant: the
    drafter's law leaks into the output)."""
    import torch

    bonus = torch.multinomial(new_logits[0, -1].softmax(dim=-1), 1)[None]
    return torch.cat([candidate_input_ids[:, -candidate_length:], bonus], dim=-1), candidate_length


def _accepting_every_candidate():
    """``GenerationMixin._assisted_decoding`` of the installed transformers with its sampled-match line (the
    verification of candidates that come without a law: prompt lookup) changed to accept every candidate, the
    target's own samples kept at each position (a mutant: each token is conditioned on the copied candidates)."""
    import textwrap

    from transformers.generation import utils

    source = textwrap.dedent(inspect.getsource(utils.GenerationMixin._assisted_decoding))
    line = "n_matches = ((~(candidate_new_tokens == selected_tokens[:, :-1])).cumsum(dim=-1) < 1).sum()"
    if source.count(line) != 1:
        raise RuntimeError("transformers' sampled-match line moved: update this mutant")
    namespace = dict(vars(utils))
    exec(compile(source.replace(line, "n_matches = torch.tensor(candidate_length)"), utils.__file__, "exec"),
         namespace)
    return namespace["_assisted_decoding"]


def _target_logits_by_candidate_map(self, assistant_logits):
    """``AssistantToTargetTranslator.get_target_logits`` with the pruned head's logit ``k`` put at the target id of
    ``assistant_overlap_token_ids[k]``, the map ``get_target_ids`` uses for the candidate ids (the fix)."""
    import torch

    shape = (*assistant_logits.shape[:-1], self.target_vocab_size)
    target_logits = torch.full(shape, self.FILTER_VALUE, device=assistant_logits.device)
    to_target = self._assistant_to_target_input_ids
    if self.assistant_prune_lm_head:
        target_logits[..., to_target[self.assistant_overlap_token_ids]] = assistant_logits
    else:
        mask = to_target != self.SUPPRESS_TOKEN_ID
        target_logits[..., to_target[mask]] = assistant_logits[..., : to_target.shape[0]][..., mask]
    return target_logits


def _g(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def main(argv=None) -> int:
    import transformers
    from transformers.generation import candidate_generator

    from specdec_check import check_generator
    from specdec_check.adapters.hf import from_hf_generate
    from specdec_check.models import from_hf_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=4,
                        help="new tokens per row (default 4: the Gemma 4 assistant's drafts first reach position 1 of 3)")
    parser.add_argument("--only", nargs="*", default=None, metavar="TEXT",
                        help="run only the modes whose name contains one of these texts")
    args = parser.parse_args(argv)
    fx = _fixtures()
    target, draft = fx.tiny_llama(0), fx.tiny_llama(0, scale=8.0)
    target_tokenizer = fx.bpe_tokenizer(fx.TARGET_MERGES)
    universal_target = fx.tiny_llama(0, vocab=len(target_tokenizer))

    def universal(ids_descending):
        draft_tokenizer = fx.bpe_tokenizer(fx.DRAFT_MERGES, ids_descending=ids_descending)
        model = fx.tiny_llama(1, vocab=len(draft_tokenizer), scale=8.0)
        return dict(target=universal_target, draft=model, oracle=from_hf_model(universal_target, top_k=3),
                    loop=from_hf_generate(top_k=3, tokenizer=target_tokenizer, assistant_tokenizer=draft_tokenizer))

    plain = dict(target=target, draft=draft, oracle=from_hf_model(target, top_k=3), loop=from_hf_generate(top_k=3))
    gemma_target, gemma_assistant = fx.tiny_gemma4_pair()
    gemma = dict(target=gemma_target, draft=gemma_assistant, oracle=from_hf_model(gemma_target, top_k=3),
                 loop=from_hf_generate(top_k=3))
    def dflash(eos=None):
        """The suite's DFlash pair (None on a release without DFlash), 8 new tokens a row (blocks of 4)."""
        pair = fx._dflash_pair()
        if pair is None:
            return None
        pair[0].generation_config.eos_token_id = eos
        return dict(target=pair[0], draft=pair[1], oracle=from_hf_model(pair[0], top_k=3), max_new_tokens=8,
                    loop=from_hf_generate(top_k=3, speculation_type="dflash"))

    source = inspect.getsource(transformers.generation.utils.GenerationMixin._assisted_decoding)
    fixed_47912 = "Same tensor the stopping criteria" in source  # #48981 (read from the installed code)
    single_position = candidate_generator.SinglePositionMultiTokenCandidateGenerator
    translator = candidate_generator.AssistantToTargetTranslator
    runs = [
        ("assisted generation", "AssistedCandidateGenerator", plain, contextlib.nullcontext(), "passed"),
        ("prompt lookup (3 tokens)", "PromptLookupCandidateGenerator",
         {**plain, "loop": from_hf_generate(top_k=3, prompt_lookup_num_tokens=3), "prompts": fx.LOOKUP_PROMPTS},
         contextlib.nullcontext(), "passed"),
        ("early exit (the target's first layer drafts)", "EarlyExitCandidateGenerator",
         {**plain, "loop": from_hf_generate(top_k=3, assistant_early_exit=1)}, contextlib.nullcontext(), "passed"),
        ("universal assisted, draft vocabulary ids ascending", "UniversalSpeculativeDecodingGenerator",
         universal(False), contextlib.nullcontext(), "passed"),
        ("universal assisted, draft vocabulary ids descending", "UniversalSpeculativeDecodingGenerator",
         universal(True), contextlib.nullcontext(), "failed"),
        ("universal assisted, ids descending, get_target_logits fixed", "UniversalSpeculativeDecodingGenerator",
         universal(True), _patched(translator, "get_target_logits", _target_logits_by_candidate_map), "passed"),
        ("Gemma 4 assistant (single-position multi-token drafts)", "SinglePositionMultiTokenCandidateGenerator",
         gemma, contextlib.nullcontext(), "failed"),
        ("Gemma 4 assistant, q the drafted tokens' point mass", "SinglePositionMultiTokenCandidateGenerator",
         gemma, _patched(single_position, "get_candidates", fx.drafted_point_mass(single_position.get_candidates)),
         "passed"),
        ("mutant: assisted with #47932 reintroduced (raw q)", "AssistedCandidateGenerator", plain,
         _patched(candidate_generator.AssistedCandidateGenerator, "_generate_candidates", _raw_q), "failed"),
        ("mutant: early exit accepting every draft", "EarlyExitCandidateGenerator",
         {**plain, "loop": from_hf_generate(top_k=3, assistant_early_exit=1)},
         _patched(transformers.generation.utils, "_speculative_sampling", _accept_every_draft), "failed"),
        ("mutant: prompt lookup accepting every candidate", "PromptLookupCandidateGenerator",
         {**plain, "loop": from_hf_generate(top_k=3, prompt_lookup_num_tokens=3), "prompts": fx.LOOKUP_PROMPTS},
         _patched(transformers.generation.utils.GenerationMixin, "_assisted_decoding", _accepting_every_candidate()),
         "failed"),
    ]
    if dflash() is not None:
        runs += [
            ("DFlash block drafts (blocks of 4, 8 new tokens)", "DFlashTokenCandidateGenerator", dflash(),
             contextlib.nullcontext(), "passed"),
            # token 1: the draft this pair most often accepts with a token committed after it
            ("DFlash, stop token 1 (#47912)", "DFlashTokenCandidateGenerator", dflash(eos=1),
             contextlib.nullcontext(), "passed" if fixed_47912 else "failed"),
        ]
    print(f"transformers {transformers.__version__}; tiny Llama pairs (V = 32, and 32 / 26 over two tokenizers) and a "
          f"tiny Gemma 4 pair (V = 32), top-k 3, do_sample=True, "
          f"{args.max_new_tokens} new tokens per row, quick mode, seed 0\n")
    print("| mode | candidate generator | verdict | rows | s | achieved TV | first-token plug-in TV | target calls "
          "per token |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    bad, failures = 0, []
    for name, generator_class, setup, patch, expected in runs:
        if args.only and not any(text in name for text in args.only):
            continue
        setup = dict(setup)
        loop, prompts = setup.pop("loop"), setup.pop("prompts", fx.PROMPTS)
        new_tokens = setup.pop("max_new_tokens", args.max_new_tokens)
        started = time.perf_counter()
        with patch:
            report = check_generator(loop, **setup, prompts=prompts, max_new_tokens=new_tokens, mode="quick", seed=0)
        took = time.perf_counter() - started
        first = [r.tv_plugin for r in report.results if r.details.get("test") == "first_token"]
        calls = report.scenarios[0].target_calls_per_token if report.scenarios else None
        cells = [_g(report.achieved_tv), _g(first[0] if first else None), _g(calls)]
        print(f"| {name} | {generator_class} | {report.verdict} | {report.samples_used:,} | {took:.0f} | "
              f"{' | '.join(cells)} |", flush=True)
        bad += report.verdict != expected
        failures += [f"- {name}: {f.line()}" for f in report.findings if f.kind == "failure"][:1]
    if failures:
        print("\nFirst failure of each failed mode:\n")
        print("\n".join(failures))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
