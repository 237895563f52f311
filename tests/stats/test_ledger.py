"""Tests of AlphaLedger."""
import json

import pytest

from specdec_check.stats import AlphaBudgetExceeded, AlphaLedger


class TestAlphaLedger:
    def test_spend_and_raise(self):
        led = AlphaLedger(1e-6, planned=4)
        assert led.per_check == pytest.approx(2.5e-7)
        assert led.spend("a") == pytest.approx(2.5e-7)
        assert led.spend("b", checks=2) == pytest.approx(5e-7)
        assert led.spent == pytest.approx(7.5e-7) and led.remaining == pytest.approx(2.5e-7)
        assert [e[0] for e in led.entries] == ["a", "b"]
        with pytest.raises(AlphaBudgetExceeded, match=r"'c'.*plan of 4"):
            led.spend("c", checks=2)
        assert led.spend("d") == pytest.approx(2.5e-7)
        with pytest.raises(AlphaBudgetExceeded):
            led.spend("e")
        assert issubclass(AlphaBudgetExceeded, RuntimeError)
        d = led.to_dict()
        json.dumps(d, allow_nan=False)
        assert d["checks_spent"] == 4 and d["spent"] <= d["total"] * (1 + 1e-12)

    def test_default_total(self):
        assert AlphaLedger(planned=10).per_check == pytest.approx(1e-7)

    @pytest.mark.parametrize("kw", [{"total": 0.0, "planned": 3}, {"total": 1.5, "planned": 3},
                                    {"total": 1e-6, "planned": 0}, {"total": 1e-6, "planned": 2.5}])
    def test_bad_input(self, kw):
        with pytest.raises(ValueError):
            AlphaLedger(**kw)
        with pytest.raises(ValueError, match="checks"):
            AlphaLedger(planned=3).spend("x", checks=0)
