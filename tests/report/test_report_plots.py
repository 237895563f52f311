"""Figures: law data with confidence intervals, deterministic PNG bytes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from specdec_check.report import _plots  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def test_law_data_normalises_a_joint_law():
    labels, exp, freq, lo, hi, total = _plots.law_data({"observed": [10, 30, 60], "expected": [0.1, 0.3, 0.6]})
    assert labels == ["0", "1", "2"] and total == 3
    np.testing.assert_allclose(freq, [0.1, 0.3, 0.6])
    assert np.all(lo <= freq) and np.all(freq <= hi) and np.all((lo <= exp) & (exp <= hi))


def test_law_data_normalises_conditional_rows_separately():
    data = {"observed": [[10, 30], [200, 200]], "expected": [[0.25, 0.75], [0.5, 0.5]]}
    labels, exp, freq, lo, hi, total = _plots.law_data(data)
    assert labels == ["0,0", "0,1", "1,0", "1,1"]
    np.testing.assert_allclose(freq, [0.25, 0.75, 0.5, 0.5])
    assert (hi - lo)[0] > (hi - lo)[2]  # fewer samples in row 0: wider intervals


def test_law_data_keeps_the_most_probable_bins():
    v = 500
    expected = np.full(v, 0.5 / (v - 1))
    expected[7] = 0.5
    observed = np.round(expected * 10_000).astype(int)
    labels, exp, *_, total = _plots.law_data({"observed": observed.tolist(), "expected": expected.tolist()})
    assert total == v and len(labels) == _plots.MAX_BINS and "7" in labels


@pytest.mark.parametrize("details", [{}, {"observed": [1, 2]}, {"observed": [1, 2], "expected": [0.5]},
                                     {"observed": "x", "expected": "y"}, {"observed": [-1, 2], "expected": [.5, .5]}])
def test_law_data_ignores_unusable_details(details):
    assert _plots.law_data(details) is None
    assert _plots.law_png({"details": details}) is None


def test_figures_are_png_and_deterministic(failed_report):
    data = failed_report.to_dict()
    first = _plots.report_figures(data)
    second = _plots.report_figures(data)
    assert [t for t, _, _ in first] == ["Tokens per step", "Speedup projection", "p-value / e-value overview",
                                       "first_token: exact against empirical law",
                                       "stop_conditional: exact against empirical law"]
    assert all(png.startswith(PNG) for _, _, png in first)
    assert [p for *_, p in first] == [p for *_, p in second]


def test_no_figures_without_data():
    assert _plots.efficiency_png([]) is None and _plots.speedup_png([]) is None
    assert _plots.pvalue_png([{"pvalue": None, "evalue": None}], 1e-7) is None


def test_names_that_look_like_mathtext_or_are_huge_still_draw(failed_report, recwarn):
    """A ``$`` in a name is drawn as a literal dollar, not parsed as mathtext; names are cut to LABEL_LIMIT."""
    data = failed_report.to_dict()
    for record in data["results"]:
        record["scenario"] = "$\\frac{" + record["scenario"] + "$ costs $5"
        record["check"] = record["check"] + "$\\undefinedcommand$"
    for s in data["scenarios"]:
        s["name"] = "$" + "x" * 100_000
    figures = _plots.report_figures(data)
    assert len(figures) == 5, [t for t, _, _ in figures]
    assert not [w for w in recwarn if "left out" in str(w.message)]
    assert _plots._label("a$b" + "y" * 100) == "a\\$b" + "y" * 44 + "…"


def test_every_colour_of_the_evidence_figure_has_a_legend_entry(monkeypatch):
    """A rejected test in a passed report (a warning's) is drawn red: the legend says what red is."""
    pytest.importorskip("matplotlib")
    import matplotlib.axes

    from specdec_check.report._plots import pvalue_png

    seen = []
    original = matplotlib.axes.Axes.legend

    def legend(self, *args, **kwargs):
        seen.extend(self.get_legend_handles_labels()[1])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "legend", legend)
    results = [{"check": "first_token", "pvalue": 0.4, "passed": True},
               {"check": "zero_coins", "pvalue": 1e-9, "passed": False}]
    assert pvalue_png(results, 1e-7)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "passed, p-value" in seen and any(s.startswith("rejected") and s.endswith("p-value") for s in seen), seen
