"""Streaming law tests: counts per call, an anytime-valid e-process, then a fixed-n test.

Each law test spends its share of alpha in two halves (union bound): one on the
Lindon & Malek (2022) e-process, watched after every call so failures stop early,
one on the exact fixed-n identity test at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ... import stats
from .report import TestRecord
from ..backends.xp import as_int64, bincount, is_host

__all__ = ["CountTally", "PitTally", "ShardCounts", "describe_cell", "law_evidence", "merge_evidence", "shipped"]

#: The e-process is updated once the pending counts reach 1/LOOK_GROWTH of what it has seen (and at
#: least MIN_LOOK samples): looking less often keeps any stopping time valid at a cost logarithmic in
#: the number of calls, and a failure is still seen within 12.5% more samples than it needed.
LOOK_GROWTH = 8
MIN_LOOK = 256
#: Laws of at most this many cells carry their observed and expected counts in the record (plots, tables).
RECORD_CELLS = 256
#: PIT tallies keep per-category counts for plots when the row laws have at most this many outcomes.
PLOT_CATEGORIES = 64
#: Support violations listed in a record (the count of all is in the test's result).
RECORD_VIOLATIONS = 10
#: Where a PIT tally's laws are too wide to count per token, it keeps (bin, outcome) pairs of its first
#: samples, at most BIN_SAMPLE_PER_CALL from each call up to BIN_SAMPLE in all, so that a failing bin can
#: be shown by the tokens that landed in it (a sample: at 4096 pairs a token with 5% of a bin is seen
#: about 13 times when the bin holds 1/16 of the samples), at a cost of a slice per call.
BIN_SAMPLE = 4096
BIN_SAMPLE_PER_CALL = 64
#: Tokens listed for a failing PIT bin.
BIN_TOKENS = 3


def describe_cell(describe, index: int) -> str:
    """``describe(index)``, or ``"cell <index>"`` without a describer: the name of a law's cell in a report."""
    return describe(int(index)) if describe is not None else f"cell {int(index)}"


def law_evidence(record) -> str:
    """The failing record's most deviant cell in tokens, for a finding's message: per-token cells where
    they were counted (``worst_tokens``), else the worst cell (a joint law's token string, or a PIT bin
    with the tokens most often seen in it). Empty when the record has no cells."""
    details = record.details
    cells = details.get("worst_tokens") or details.get("worst_cells") or []
    if not cells:
        return ""
    cell = cells[0]
    text = f"; most deviant: {cell.get('cell', cell['index'])}, seen {cell['observed']:,} time(s) vs {cell['expected']:.4g} expected"
    if cell.get("tokens_seen"):
        seen = ", ".join(f"{t['cell']} ({t['count']})" for t in cell["tokens_seen"])
        text += f" (in a sample of {cell['tokens_sampled']:,} of its outcomes: {seen})"
    return text


@dataclass
class ShardCounts:
    """A later shard's counts of one test (:meth:`CountTally.shipped`): what it sends back to be merged, a
    few arrays instead of the law and the e-process it never looked at."""

    check: str
    counts: np.ndarray
    category_counts: np.ndarray | None = None
    category_expected: np.ndarray | None = None
    bin_sample: list = field(default_factory=list)
    rejected_early = False  # a later shard does not test on its own


def shipped(evidence):
    """``evidence`` (tallies, dicts of them, None) as a later shard sends it back: counts only."""
    if isinstance(evidence, CountTally):
        return evidence.shipped()
    if isinstance(evidence, dict):
        return {key: shipped(value) for key, value in evidence.items()}
    return evidence


def merge_evidence(earlier, later):
    """``earlier`` with ``later`` merged in: tallies merge (:meth:`CountTally.merge`), dicts key by key, None
    stays None (a test neither shard ran). The evidence of a scenario's shards, in shard order."""
    if isinstance(earlier, CountTally):
        return earlier.merge(later)
    if isinstance(earlier, dict):
        if set(earlier) != set(later):
            raise ValueError(f"shards ran different tests: {sorted(earlier)} vs {sorted(later)}.")
        return {key: merge_evidence(value, later[key]) for key, value in earlier.items()}
    if earlier is None and later is None:
        return None
    raise TypeError(f"cannot merge {type(earlier).__name__} evidence with {type(later).__name__}.")


def _host(values) -> np.ndarray:
    return np.asarray(values) if is_host(values) else values.cpu().numpy()


class CountTally:
    """Counts of categorical outcomes against one fixed exact law ``probs`` [k].

    ``describe(index) -> str`` names a cell in the tokens it stands for (``"tokens (3, 1)"``,
    ``"2 drafts accepted, then token 5"``); a record's worst cells carry that name as ``"cell"``.
    """

    method = "identity"

    def __init__(self, scenario: str, check: str, probs: np.ndarray, *, alpha: float, sequential: bool = True,
                 describe=None, resolution: float | None = None):
        self.scenario, self.check, self.describe = scenario, check, describe
        self.probs = np.asarray(probs, dtype=np.float64)
        self.alpha = alpha
        self.counts = np.zeros(self.probs.size, dtype=np.int64)
        # ``resolution`` (the mode's design TV) keeps the e-process's power down to it (a --tv run).
        self.sequential = (stats.SequentialIdentityTest(self.probs, alpha=alpha / 2, min_tv=resolution)
                           if sequential else None)
        self.pending = None

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def rejected_early(self) -> bool:
        return self.sequential is not None and self.sequential.rejected

    def cell_name(self, index: int) -> str:
        """The name of cell ``index`` in a report (the tokens it stands for, when the tally knows them)."""
        return describe_cell(self.describe, index)

    def add_counts(self, counts: np.ndarray) -> None:
        """Add a batch; the e-process is updated once the pending batch is 1/8 of what it has seen.

        Looking at the e-process less often keeps it valid (any stopping time is allowed) and
        keeps its cost logarithmic in the number of calls.
        """
        self.counts += counts
        if self.sequential is not None and not self.sequential.rejected:
            self.pending = counts if self.pending is None else self.pending + counts
            if self.pending.sum() >= max(MIN_LOOK, self.sequential.n // LOOK_GROWTH):
                self.flush()

    def flush(self) -> None:
        if self.sequential is not None and self.pending is not None and not self.sequential.rejected:
            self.sequential.update(self.pending)
        self.pending = None

    def add_codes(self, codes) -> None:
        """Count outcome codes (a numpy array, or a tensor counted on its device)."""
        self.add_counts(bincount(codes, self.probs.size))

    def shipped(self) -> "ShardCounts":
        """What a later shard of a scenario sends back: its counts alone (no law, no e-process)."""
        return ShardCounts(self.check, self.counts)

    def merge(self, later) -> "CountTally":
        """Add a later shard's counts (:meth:`shipped`: the same test on the samples after these) and look at
        the e-process once at the shard boundary; returns self.

        The e-process stays one Dirichlet-multinomial mixture on the cumulative counts (Lindon & Malek
        2022): a test martingale looked at after this shard's own looks and at each later shard's boundary,
        a stopping rule like any other (Ville's inequality holds at any stopping time). A later shard does
        not look on its own: it cannot see the counts before it. The fixed-n test of the record sees every
        count: counts of independent samples add.
        """
        if later.counts.shape != self.counts.shape or later.check != self.check:
            raise ValueError(f"cannot merge tally {later.check!r} into {self.check!r}: not the same test.")
        self.flush()
        self.counts += later.counts
        if self.sequential is not None and not self.sequential.rejected:
            self.sequential.update(later.counts)
        return self

    def record(self, *, extra_details: dict | None = None) -> TestRecord:
        self.flush()
        details = dict(extra_details or {})
        fixed_alpha = self.alpha / 2 if self.sequential is not None else self.alpha
        result = stats.identity_test(self.counts, self.probs, alpha=fixed_alpha)
        evalue = None
        passed = not result.rejected
        if self.sequential is not None:
            evalue = float(self.sequential.e_value)
            details["sequential_rejected"] = bool(self.sequential.rejected)
            details["sequential_alpha"] = self.alpha / 2
            passed = passed and not self.sequential.rejected
        details["worst_cells"] = [dict(cell, cell=self.cell_name(cell["index"])) for cell in result.worst_cells]
        details["support_violations"] = list(result.support_violations)[:RECORD_VIOLATIONS]
        if self.probs.size <= RECORD_CELLS:
            details["observed"] = self.counts.tolist()
            details["expected"] = self.probs.tolist()
        return TestRecord(
            scenario=self.scenario, check=self.check, method=f"{self.method}: {result.method}", passed=bool(passed),
            alpha=self.alpha, n=int(result.n), statistic=float(result.statistic), pvalue=float(result.pvalue),
            evalue=evalue, bins=int(result.bins), min_detectable_tv=float(result.min_detectable_tv),
            tv_plugin=float(result.tv_plugin), tv_upper=float(result.tv_upper), details=details,
        )


class PitTally(CountTally):
    """Per-sample exact laws, mapped by a randomized PIT to uniforms counted in equal bins.

    Under the null each sample's PIT value is exactly Uniform(0, 1) (Brockwell 2007), so
    the bin counts are multinomial with equal cell probabilities whatever the vocabulary.
    ``describe(outcome) -> str`` names an outcome (a token, or an accepted count and a token) in
    the record's evidence: per-token worst cells where the laws are small enough to count per
    token, else the tokens most often seen in the worst PIT bins.
    """

    method = "randomized PIT"

    def __init__(self, scenario: str, check: str, *, bins: int, alpha: float, sequential: bool = True,
                 describe=None, resolution: float | None = None):
        super().__init__(scenario, check, np.full(bins, 1.0 / bins), alpha=alpha, sequential=sequential,
                         resolution=resolution)
        self.bins, self.outcome_describe = bins, describe
        self.category_counts = None  # optional: observed outcome counts for plotting (small laws)
        self.category_expected = None
        self.bin_sample = []  # [(bins, outcomes)] of the first samples, for laws too wide to count per token
        self.bin_sampled = 0

    def cell_name(self, index: int) -> str:
        lo, hi = index / self.bins, (index + 1) / self.bins
        return f"PIT bin {index} of {self.bins} (CDF range [{lo:.3g}, {hi:.3g}) of each sample's law)"

    def add(self, samples: np.ndarray, probs_rows: np.ndarray, rng: np.random.Generator) -> None:
        """Add samples, each with its own exact law row of ``probs_rows`` [n, V]."""
        if samples.size == 0:
            return
        u = stats.randomized_pit(samples, probs_rows, rng=rng)
        small = probs_rows.shape[-1] <= PLOT_CATEGORIES
        self.add_uniforms(u, categories=samples, expected=probs_rows.sum(axis=0) if small else None)

    def add_each(self, samples: np.ndarray, probs_rows: np.ndarray, rng: np.random.Generator) -> None:
        """:meth:`add` of each sample on its own, in order, with one PIT pass: the same counts, the same uniforms
        (``rng`` gives its doubles one by one either way), the same sums of expected counts (added row after
        row) and the same sample of (bin, outcome) pairs as ``n`` single-sample adds, at the cost of one add
        (issue 31: the batch-invariance check adds 1,350 single-row calls). A sequential tally looks at its
        e-process after each add: it takes the samples one by one."""
        samples = np.asarray(samples)
        if self.sequential is not None:
            for i in range(samples.shape[0]):
                self.add(samples[i:i + 1], probs_rows[i:i + 1], rng)
            return
        if samples.size == 0:
            return
        u = stats.randomized_pit(samples, probs_rows, rng=rng)
        binned = as_int64(u * self.bins).clip(max=self.bins - 1)
        self.add_counts(bincount(binned, self.bins))  # integer counts: their order does not matter
        if probs_rows.shape[-1] <= PLOT_CATEGORIES:
            if self.category_counts is None:
                self.category_counts = np.zeros(probs_rows.shape[-1])
                self.category_expected = np.zeros(probs_rows.shape[-1])
            self.category_counts += bincount(samples, probs_rows.shape[-1])[: probs_rows.shape[-1]]
            for row in probs_rows:  # row after row, as single adds sum them (float sums depend on the order)
                self.category_expected += row
            return
        for i in range(min(samples.shape[0], max(0, BIN_SAMPLE - self.bin_sampled))):  # one pair per single add
            self.bin_sample.append((_host(binned[i:i + 1]), _host(samples[i:i + 1])))
            self.bin_sampled += 1

    def add_uniforms(self, u, *, categories=None, expected=None) -> None:
        """Add PIT values ``u``; ``categories`` and ``expected`` (a law's counts) feed the plots of small laws.

        ``u`` and ``categories`` may be device tensors: they are binned and counted there.
        """
        binned = as_int64(u * self.bins).clip(max=self.bins - 1)
        self.add_counts(bincount(binned, self.bins))
        if categories is not None and expected is None and self.bin_sampled < BIN_SAMPLE:
            take = min(BIN_SAMPLE_PER_CALL, BIN_SAMPLE - self.bin_sampled, int(binned.shape[0]))
            self.bin_sample.append((_host(binned[:take]), _host(categories[:take])))
            self.bin_sampled += take
        if categories is not None and expected is not None:
            if self.category_counts is None:
                self.category_counts = np.zeros(expected.size)
                self.category_expected = np.zeros(expected.size)
            self.category_counts += bincount(categories, expected.size)[: expected.size]
            self.category_expected += expected

    def shipped(self) -> "ShardCounts":
        return ShardCounts(self.check, self.counts, self.category_counts, self.category_expected,
                           list(self.bin_sample))

    def merge(self, later) -> "PitTally":
        """:meth:`CountTally.merge`, with the per-category counts and the sample of (bin, outcome) pairs."""
        super().merge(later)
        if later.category_counts is not None:
            if self.category_counts is None:
                self.category_counts = np.zeros_like(later.category_counts)
                self.category_expected = np.zeros_like(later.category_expected)
            self.category_counts += later.category_counts
            self.category_expected += later.category_expected
        for bins, outcomes in later.bin_sample:
            take = min(BIN_SAMPLE - self.bin_sampled, int(bins.shape[0]))
            if take <= 0:
                break
            self.bin_sample.append((bins[:take], outcomes[:take]))
            self.bin_sampled += take
        return self

    def record(self, *, extra_details: dict | None = None) -> TestRecord:
        details = dict(extra_details or {})
        rec = super().record(extra_details=details)
        if self.category_counts is not None:
            # The expected counts are differences of cumulative rows: a cell of probability zero
            # can come out as -1e-17. Clip that round-off so the law is a law.
            expected = np.maximum(self.category_expected, 0.0)
            total = expected.sum()
            rec.details["observed"] = self.category_counts.astype(int).tolist()
            rec.details["expected"] = (expected / total).tolist() if total else []
            rec.details["law"] = "pooled over rows (mixture of the per-row exact laws)"
            if total and rec.n:
                law = expected / total
                rec.details["worst_tokens"] = [
                    dict(cell, cell=describe_cell(self.outcome_describe, cell["index"]))
                    for cell in stats.worst_cells(self.category_counts.astype(np.int64), law)]
        elif self.bin_sample and rec.details["worst_cells"]:
            bins = np.concatenate([b for b, _ in self.bin_sample])
            outcomes = np.concatenate([o for _, o in self.bin_sample])
            for cell in rec.details["worst_cells"]:
                seen = outcomes[bins == cell["index"]]
                values, counts = np.unique(seen, return_counts=True)
                top = np.argsort(-counts, kind="stable")[:BIN_TOKENS]
                cell["tokens_seen"] = [{"cell": describe_cell(self.outcome_describe, values[j]),
                                        "count": int(counts[j])} for j in top]
                cell["tokens_sampled"] = int(seen.size)
        return rec

