"""The io-wq judge on the committed runs: every cited delta judged relative to its baseline
share, perf diff's own delta checked against the flat profiles, each per-patch listing on the
step of kernels that holds its patch, the static-file and PHP rows bounded by what the server
analogues can show, and the lost-wakeup row a check under a stated condition."""

from __future__ import annotations

import pandas as pd
import pytest

from lab import chapters
from lab.analysis import cited, quantities, runs, verdicts

iowq = chapters.get("io-wq").module("analysis")


@pytest.fixture(scope="module")
def loaded() -> list[runs.Run]:
    """The committed io-wq runs, read (and checked against their manifests) when a test first
    asks: a worker that collects this file without running its tests pays nothing."""
    return runs.load_chapter_runs("io-wq")


@pytest.fixture(scope="module")
def chosen(loaded: list[runs.Run]) -> dict[str, runs.Run]:
    """The committed io-wq runs pooled per variant, as the notebook takes them."""
    return runs.pooled_per_variant(loaded)


@pytest.fixture(scope="module")
def judged(loaded: list[runs.Run]) -> pd.DataFrame:
    """The judge's rows of the committed runs, by id."""
    return iowq.judge(cited.to_frame(cited.load_all()), loaded).set_index("id")


def test_every_measured_delta_is_judged_relative_to_its_baseline_share(
        judged: pd.DataFrame) -> None:
    deltas = judged[judged.index.str.endswith("-delta") & judged["our_low"].notna()]
    assert len(deltas) >= 20
    assert (deltas["our_unit"] == "%").all()
    assert (deltas["margin"] == quantities.MARGINS["share-relative"].size).all()
    # no reason calls an interval that excludes the cited change too wide
    excludes = (deltas["cited_change"] < deltas["our_low"]) | (
        deltas["cited_change"] > deltas["our_high"])
    assert not deltas[excludes]["reason"].str.contains("too wide").any()


@pytest.mark.parametrize(("baseline", "patched"), list(iowq.STEPS.values()))
def test_perf_diff_s_delta_is_the_difference_of_the_flat_profiles(
        baseline: str, patched: str, chosen: dict[str, runs.Run]) -> None:
    for symbol in (iowq.SLOWPATH, iowq.UNLOCK_IRQ, "_raw_spin_unlock_irqrestore"):
        deltas = iowq.diff_deltas(chosen, "nop", baseline, patched, symbol)
        got = iowq.shares(chosen, "nop", symbol, (baseline, patched))
        hand = got[patched] - got[baseline]
        assert len(deltas) == len(hand) == 5
        assert (deltas - hand).abs().max() <= 0.011 + 1e-9, (symbol, deltas, hand)


def test_each_per_patch_listing_is_judged_on_the_step_that_holds_its_patch(
        judged: pd.DataFrame) -> None:
    for prefix, step in (("io-wq-4of8-nop-", "k1 - k2"), ("io-wq-5of8-nop-", "k0 - k1"),
                         ("io-wq-nop-", "k0 - k2")):
        rows = judged[judged.index.str.startswith(prefix) & judged.index.str.endswith("-delta")]
        assert len(rows) and rows["ours"].str.startswith(step).all(), prefix


@pytest.mark.parametrize(("listing", "workload"), [("-http-static-", "http"),
                                                   ("-http-php-", "php")])
def test_the_server_rows_say_the_analogue_cannot_move_them(
        listing: str, workload: str, judged: pd.DataFrame, chosen: dict[str, runs.Run]) -> None:
    rows = judged[judged.index.str.contains(listing) & judged.index.str.endswith("-delta")]
    own = rows[~rows["reason"].str.contains(
        "belongs to [78]/8|3/8's rename|no sample|interrupts off")]
    assert len(own) >= 3
    assert (own["verdict"] == verdicts.INCONCLUSIVE).all()
    assert own["reason"].str.contains("cannot move this row").all()
    # the reason's item rate is the server's own count over its load's duration, below the
    # flood's, and the server did the fixed work on every boot of the kernels compared
    rate = iowq.item_rate(chosen, workload, "k2")
    assert 0 < rate.mean() < iowq.item_rate(chosen, "nop", "k2").mean()
    assert f"{rate.mean():,.0f} items/s on k2" in own["reason"].iloc[0]
    for kernel in iowq.KERNELS:
        done = runs.metric_values(chosen[kernel], kernel, workload, "load.requests")
        assert len(set(done)) == 1 and len(done) == 5, kernel


def test_no_cited_row_is_left_not_measured(judged: pd.DataFrame) -> None:
    assert not (judged["verdict"] == verdicts.NOT_YET).any()
    assert len(judged[judged.index.str.contains("-http-php-")]) == 22


def test_the_lost_wakeups_are_a_check_with_its_condition(judged: pd.DataFrame) -> None:
    row = judged.loc["io-wq-check-lost-wakeups"]
    assert row["row_kind"] == verdicts.CHECK and row["verdict"] == verdicts.PASSED
    assert "second waiter" in row["reason"] and "not that the author's server" in row["reason"]


def test_a_cited_relative_change_carries_the_printing_of_both_numbers() -> None:
    entries = pd.DataFrame([
        {"column": "baseline", "mid": 42.25, "true_low": 42.245, "true_high": 42.255,
         "cited": "42.25%"},
        {"column": "delta", "mid": -9.24, "true_low": -9.245, "true_high": -9.235,
         "cited": "-9.24%"}])
    got = iowq.cited_relative(entries)
    assert got.value == pytest.approx(-21.87, abs=0.01)
    assert got.low == pytest.approx(100 * -9.245 / 42.245)
    assert got.high == pytest.approx(100 * -9.235 / 42.255)
    assert "-9.24% of 42.25%" in got.text
