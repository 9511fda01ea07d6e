"""The scorecard: every cited number beside our value, the environment, a verdict and its reason.

A cited entry with no committed measurement is "not yet measured". A measured entry is
"measured, not yet judged" unless its chapter has a judge (:func:`lab.analysis.judges.judges`): a
function that decides, from the committed runs alone, which of our values stands for each cited
entry and what agreement means for it. The chapter's notebook and the scorecard's notebook call
the same judge, so the verdict a chapter explains is the verdict the scorecard lists, and
neither is typed by hand. This module holds what judges share.

The rule a judge applies (see :func:`compare` and :func:`verdict_rows`):

* a cited *change* is judged from the interval of our change by
  :func:`lab.analysis.verdicts.judge_change`;
* a cited before/after pair without a written change gets a *derived* row: the change the pair
  implies, judged the same way, with its own id (the baseline entry's id ending in ``-change``);
* a cited *absolute* value (items/s, ns) of the author's machine is never comparable with a
  value from another machine, let alone an emulator: "absolute value not comparable", and its
  reason says how the change it belongs to fared;
* a judge may add *mechanism* rows (a clock-free counterpart of the author's explanation,
  judged for direction) and *check* rows (pass/fail, never support) beside them; every row
  carries its kind (:data:`lab.analysis.verdicts.ROW_KINDS`) in ``row_kind``.

Rows that are not cited entries carry their own ``chapter``, ``table``, ``row``, ``column`` and
``cited`` (:data:`DERIVED_COLUMNS`). Every judged row also carries the numbers its verdict was
decided from (:data:`lab.analysis.verdicts.NUMBER_COLUMNS`, via
:meth:`lab.analysis.verdicts.Verdict.columns`), so
the book's figures draw them instead of re-reading the text: the scorecard page's figure of
every row (:func:`overview`) and the landing page's panel of each chapter
(:func:`lab.analysis.headlines.headlines`, with the tallies of each kind of row, :func:`tally`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from lab.analysis import quantities, runs, stats, verdicts

NOT_YET = verdicts.NOT_YET
NOT_YET_REASON = "no committed run measures it yet"

DERIVED_COLUMNS = [*runs.MEASURED_COLUMNS, "chapter", "table", "row", "column", "cited",
                   *verdicts.NUMBER_COLUMNS]
"""A judge's rows: :data:`lab.analysis.runs.MEASURED_COLUMNS`; for a derived or mechanism row
(whose id
is not a cited one) where it stands and what cited value it is judged against; and the numbers
of its verdict (NaN where a verdict was not decided from an interval)."""


def judged_row(rid: str, ours: str, verdict: verdicts.Verdict, run_ids: Iterable[str],
               environment: str, **where: Any) -> dict[str, Any]:
    """One row of a judge's frame (:data:`DERIVED_COLUMNS`), the one place every chapter's rows
    take their shape: the verdict's columns, the runs the row was measured in (joined once
    each, in the order given) and where they ran. ``where`` names the row's place (chapter,
    table, row, column, cited) or a reason that replaces the verdict's; a key outside the
    columns is refused, so a judge cannot add a column the scorecard would drop."""
    unknown = set(where) - set(DERIVED_COLUMNS)
    if unknown:
        raise ValueError(f"judged_row({rid!r}): no scorecard column {sorted(unknown)}; "
                         f"the columns are {DERIVED_COLUMNS}")
    return {"id": rid, "ours": ours, **verdict.columns(),
            "run_id": " + ".join(dict.fromkeys(run_ids)), "environment": environment, **where}


DERIVED_COLUMN = "change (derived from the pair)"
"""The ``column`` label of a derived change row."""

ROLES = ("baseline", "patched")
"""The two cited variants a comparison needs; the change is patched against baseline."""


@dataclass(frozen=True)
class Measure:
    """Which of our values stand for the cited entries of one row of one cited table.

    ``metrics`` of ``workload`` are read for each role's run variant (``variants``: cited
    variant -> variant name in the runs). Several metrics are averaged per boot, so a boot stays
    the unit of the interval. With ``exclude_zeros`` a value of exactly 0 is left out
    (and counted): the right choice for a duration that a stopped clock reports as 0. ``unit``
    is the unit of our metric, which must be the cited one for a claim to be judged, and
    ``margin`` the key of its kind in :data:`lab.analysis.quantities.MARGINS`. ``assume`` states,
    when the
    cited unit is not ours, the assumption under which the cited change is a change of our
    quantity (counts over sets of a stated equal size are a rate): the claim is then judged in
    our unit and the reason says what it assumes. ``cannot_show`` says why this environment
    cannot show the cited change at all (:func:`lab.analysis.verdicts.judge_change`): the row is
    then
    "inconclusive here" with that reason, whatever the interval.
    """

    workload: str
    metrics: tuple[str, ...]
    unit: str
    margin: str
    variants: dict[str, str] = field(default_factory=lambda: {r: r for r in ROLES})
    exclude_zeros: bool = False
    assume: str = ""
    cannot_show: str = ""


def measures_from_experiment(chosen: dict[str, runs.Run], cited: pd.DataFrame,
                             units: dict[str, tuple[str, str]], *, assume: str = "",
                             cannot_show: str = "") -> dict[tuple[str, str], Measure]:
    """The measures an experiment declares with ``cited:`` (metric -> variant -> cited id).

    Read from the manifests of the chosen runs, oldest first, so a newer run's declaration wins.
    ``units`` gives each declared metric its unit and margin kind (the chapter's judge knows
    what its metrics measure); a declared metric without one is an error, because a claim must
    not be judged by a quantity nobody named. ``assume`` and ``cannot_show`` are
    :attr:`Measure.assume` and :attr:`Measure.cannot_show` for all.
    """
    by_id = cited.set_index("id")
    measures: dict[tuple[str, str], Measure] = {}
    for run in sorted({id(r): r for r in chosen.values()}.values(), key=lambda r: r.run_id):
        for workload in run.manifest.get("experiment", {}).get("workloads", []):
            for metric, ids in (workload.get("cited") or {}).items():
                known = {v: i for v, i in ids.items() if i in by_id.index}
                if not known:
                    continue
                entries = by_id.loc[list(known.values())]
                key = (str(entries["table"].iloc[0]), str(entries["row"].iloc[0]))
                roles = {str(by_id.loc[i, "variant"]): v for v, i in known.items()}
                if metric not in units:
                    raise ValueError(f"metric {metric!r} of workload {workload['name']!r} maps "
                                     "to cited entries but its judge names no unit for it. Fix: "
                                     "add it to the units the chapter's analysis.py passes")
                unit, margin = units[metric]
                measures[key] = Measure(workload=workload["name"], metrics=(metric,),
                                        unit=unit, margin=margin, variants=roles,
                                        assume=assume, cannot_show=cannot_show)
    return measures


def _measured(run: runs.Run | None, variant: str, measure: Measure) -> tuple[pd.Series, int]:
    """Per-boot values of one role (mean over the measure's metrics) and the zeros left out."""
    if run is None:
        return pd.Series(dtype=float), 0
    parts = [runs.metric_values(run, variant, measure.workload, m) for m in measure.metrics]
    values = pd.concat(parts) if parts else pd.Series(dtype=float)
    zeros = int((values == 0).sum()) if measure.exclude_zeros else 0
    if measure.exclude_zeros:
        values = values[values != 0]
    return values.groupby(level=0).mean(), zeros


def cited_change(entries: pd.DataFrame) -> quantities.Cited:
    """The cited change of one row in percent, with the interval its printed values can mean.

    A change entry is taken as written, blurred by its last digit, or as "no change" where the
    author says that is how he reads it (``reads_as``); without one, the change is
    the one the cited before/after pair implies, and its interval runs from the lowest patched
    over the highest baseline value to the highest over the lowest that the printing allows
    (:meth:`lab.analysis.cited.Value.bounds`: "95" and "97" printed by truncation mean +1.0 to +3.2
    %).
    """
    change = entries[entries["variant"] == "change"]
    if len(change):
        row = change.iloc[0]
        if row.get("reads_as") == "no change":
            return quantities.Cited(0.0, 0.0, 0.0, f"{row['cited']}, read by the author as no "
                                                 "change",
                                  note=f"printed {row['cited']}, read by the author as no change")
        return quantities.Cited(float(row["mid"]), float(row["true_low"]),
                              float(row["true_high"]), str(row["cited"]))
    ends = {r: entries[entries["variant"] == r].iloc[0] for r in ROLES}
    base, patched = ends["baseline"], ends["patched"]
    percent = 100 * (float(patched["mid"]) / float(base["mid"]) - 1)
    low = 100 * (float(patched["true_low"]) / float(base["true_high"]) - 1)
    high = 100 * (float(patched["true_high"]) / float(base["true_low"]) - 1)
    return quantities.Cited(percent, min(low, high), max(low, high),
                          f"{percent:+.1f} % (implied)")


def written(entries: pd.DataFrame) -> bool:
    """Whether the author wrote the row's change (else the cited pair implies it)."""
    return bool((entries["variant"] == "change").any())


def compare(cited: pd.DataFrame, chosen: dict[str, runs.Run],
            measures: dict[tuple[str, str], Measure],
            bounds: dict[tuple[str, str], quantities.Bound] | None = None) -> pd.DataFrame:
    """One row per cited (table, row) that the runs measure: cited and ours side by side.

    Each row is judged by :func:`lab.analysis.verdicts.judge_boots` (clock trouble and single
    boots said), with the :class:`lab.analysis.quantities.Bound` that ``bounds`` gives its
    (table, row), if any.

    Columns: the cited before/after/change as written and the change in percent; per role our
    per-boot values, their description (mean, n, range), the zeros excluded and the run id; our
    change (a :class:`lab.analysis.stats.Change`, or None when it cannot be computed) with
    ``percent``,
    ``low``, ``high``; the verdict and its reason, and as ``decision`` the
    :class:`lab.analysis.verdicts.Verdict` with its numbers; the environment.
    """
    rows = []
    order = list(dict.fromkeys(zip(cited["table"], cited["row"], strict=True)))
    for key in order:
        measure = measures.get(key)
        if measure is None:
            continue
        entries = cited[(cited["table"] == key[0]) & (cited["row"] == key[1])]
        if not set(ROLES) <= set(entries["variant"]):
            continue
        picked = {r: chosen.get(measure.variants[r]) for r in ROLES}
        if any(run is None for run in picked.values()):
            continue
        values, zeros = {}, {}
        for role in ROLES:
            values[role], zeros[role] = _measured(picked[role], measure.variants[role], measure)
        if values["baseline"].empty and values["patched"].empty:
            continue
        claimed = cited_change(entries)
        manifest = picked["patched"].manifest
        limits = runs.environment_limits(manifest, measure.variants["patched"])
        margin = quantities.MARGINS[measure.margin]
        # the quantity's unit: a written change's entry says "%", its pair the quantity's unit
        cited_unit = (measure.unit if measure.assume else
                      str(entries.loc[entries["variant"] == "baseline", "unit"].iloc[0]))

        def judge(change: stats.Change, claimed: quantities.Cited = claimed, limits: str = limits,
                  margin: quantities.Margin = margin, cited_unit: str = cited_unit,
                  measure: Measure = measure, key: tuple[str, str] = key) -> verdicts.Verdict:
            return verdicts.judge_change(change, claimed, limits,
                                         units=(measure.unit, cited_unit), margin=margin,
                                         bound=(bounds or {}).get(key),
                                         cannot_show=measure.cannot_show or None)

        try:
            verdict = verdicts.judge_boots(
                values["baseline"], values["patched"], judge,
                flagged=tuple(runs.clock_flags(picked[r], measure.variants[r]) for r in ROLES))
        except ValueError as exc:  # includes NotEnoughRepetitions
            verdict = verdicts.Verdict(runs.UNJUDGED, str(exc).split(". Fix:")[0])
        if measure.assume:
            verdict = replace(verdict, reason=f"{verdict.reason}; this assumes {measure.assume}")
        change = verdict.change
        rows.append({
            "table": key[0], "row": key[1], "unit": str(entries["unit"].iloc[0]),
            "workload": measure.workload, "metrics": ", ".join(measure.metrics),
            **{f"cited_{r}": str(entries.loc[entries["variant"] == r, "cited"].iloc[0])
               for r in ROLES},
            "cited_change": claimed.text, "cited_percent": claimed.value,
            "cited_change_written": written(entries),
            **{f"values_{r}": values[r] for r in ROLES},
            **{f"ours_{r}": runs.describe(values[r]) if len(values[r]) else "—" for r in ROLES},
            **{f"zeros_{r}": zeros[r] for r in ROLES},
            **{f"run_{r}": picked[r].run_id for r in ROLES},
            "change": change,
            "percent": change.percent if change else float("nan"),
            "low": change.low if change else float("nan"),
            "high": change.high if change else float("nan"),
            "ours_change": change.describe() if change else "—",
            "verdict": verdict.verdict, "reason": verdict.reason, "decision": verdict,
            "environment": runs.environment_summary(manifest), "limits": limits,
        })
    return pd.DataFrame(rows)


def _absolute_reason(row: pd.Series) -> str:
    which = "the cited change" if row["cited_change_written"] else (
        f"the change the cited pair implies ({row['cited_change'].split(' (')[0]}, its own row)")
    judged = (f"{row['verdict']} ({row['ours_change']})" if row["change"] is not None
              else row["verdict"])
    return (f"an absolute {row['unit']} of the author's machine is not comparable with one "
            f"measured under {row['limits']}; {which} is judged instead: {judged}")


def derived_id(baseline_id: str) -> str:
    """The id of the change row a cited pair implies: the baseline entry's id, ``-change``."""
    return baseline_id.removesuffix("-baseline") + "-change"


def verdict_rows(comparison: pd.DataFrame, cited: pd.DataFrame) -> pd.DataFrame:
    """The scorecard's rows (:data:`DERIVED_COLUMNS`) of every entry a comparison covers.

    The change entry takes the comparison's verdict; a pair without one gets a derived change
    row that does. The before and after entries are absolute values of the author's machine:
    not comparable, with the change's verdict as reason.
    """
    rows = []
    for _, row in comparison.iterrows():
        entries = cited[(cited["table"] == row["table"]) & (cited["row"] == row["row"])]
        both = [row[f"run_{r}"] for r in ROLES]
        for entry in entries.itertuples():
            if entry.variant in ROLES:
                zeros = row[f"zeros_{entry.variant}"]
                ours = row[f"ours_{entry.variant}"] + (
                    f"; {zeros} value(s) of 0 excluded" if zeros else "")
                verdict = verdicts.not_comparable(_absolute_reason(row))
                run_ids = [row[f"run_{entry.variant}"]]
            else:
                ours = row["ours_change"]
                verdict = row["decision"]
                run_ids = both
            rows.append(judged_row(entry.id, ours, verdict, run_ids, row["environment"]))
        if not row["cited_change_written"]:
            baseline = entries[entries["variant"] == "baseline"].iloc[0]
            rows.append(judged_row(derived_id(baseline["id"]), row["ours_change"],
                                   row["decision"], both, row["environment"],
                                   chapter=baseline["chapter"], table=row["table"],
                                   row=row["row"], column=DERIVED_COLUMN,
                                   cited=row["cited_change"]))
    return pd.DataFrame(rows, columns=DERIVED_COLUMNS)


CARD_COLUMNS = ["chapter", "id", "table", "row", "column", "cited", "ours", "environment",
                "verdict", "reason"]
"""What the scorecard tables show (the card also holds :data:`DATA_COLUMNS`)."""

KINDS = ("cited change", "cited value", "derived change", "mechanism", "check")
"""Where a card row comes from: a change the author wrote; a value of the author's machine (a
before, an after, a share); the change a cited pair implies; a counterpart of the author's
explanation; a pass/fail check. The first three are *claim* rows (``row_kind``)."""

DATA_COLUMNS = ["kind", *verdicts.NUMBER_COLUMNS]
"""The card's columns for figures and tallies: where the row comes from (:data:`KINDS`), its
kind (``row_kind``: claim, mechanism or check) and its verdict's numbers."""


def _derived_rows(cited: pd.DataFrame, judged_rows: pd.DataFrame) -> pd.DataFrame:
    """Judged rows that are not cited entries, each with the position it takes in the card:
    just after the last cited entry of its (chapter, table, row), else at its chapter's end."""
    derived = judged_rows[~judged_rows["id"].isin(cited["id"])].copy()
    if derived.empty:
        return derived.assign(position=pd.Series(dtype=float))
    missing = derived[["chapter", "table", "row", "column", "cited"]].isna().any(axis=1)
    if missing.any():
        raise ValueError(f"judged rows {derived.loc[missing, 'id'].tolist()} are not cited "
                         "entries and do not say where they stand. Fix: give them chapter, "
                         "table, row, column and cited (lab.analysis.scorecard.DERIVED_COLUMNS)")
    positions = []
    for step, row in enumerate(derived.itertuples(), 1):
        same = cited.index[(cited["chapter"] == row.chapter) & (cited["table"] == row.table)
                           & (cited["row"] == row.row)]
        if not len(same):
            same = cited.index[cited["chapter"] == row.chapter]
        positions.append((same.max() if len(same) else len(cited)) + step / (len(derived) + 1))
    return derived.assign(position=positions)


def build(cited: pd.DataFrame, measured: pd.DataFrame,
          judged_rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Join cited entries (``lab.analysis.cited.to_frame``) with measured ones
    (``lab.analysis.runs``).

    ``judged_rows`` (from :func:`lab.analysis.judges.judged`) replace the measured rows of the same
    ids;
    their derived and mechanism rows are placed beside the cited entries they stand for. The card
    has :data:`CARD_COLUMNS` and :data:`DATA_COLUMNS`.
    """
    cited = cited.reset_index(drop=True)
    measured = measured.reindex(columns=[*runs.MEASURED_COLUMNS, *verdicts.NUMBER_COLUMNS])
    derived = pd.DataFrame(columns=[*CARD_COLUMNS, *DATA_COLUMNS, "position"])
    if judged_rows is not None and not judged_rows.empty:
        judged_rows = judged_rows.reindex(columns=DERIVED_COLUMNS)
        derived = _derived_rows(cited, judged_rows)
        own = judged_rows[judged_rows["id"].isin(cited["id"])][measured.columns]
        kept = measured[~measured["id"].isin(own["id"])]
        measured = pd.concat([kept, own], ignore_index=True) if len(kept) else own
        derived["row_kind"] = derived["row_kind"].fillna(verdicts.CLAIM)
        derived["kind"] = [KINDS[2] if k == verdicts.CLAIM else
                           KINDS[3] if k == verdicts.MECHANISM else KINDS[4]
                           for k in derived["row_kind"]]
    card = cited.merge(measured, on="id", how="left").assign(position=cited.index.astype(float))
    card["kind"] = [KINDS[0] if v == "change" else KINDS[1] for v in card["variant"]]
    card["ours"] = card["ours"].fillna("—").astype(str)
    card["environment"] = card["environment"].fillna("—").astype(str)
    card["verdict"] = card["verdict"].fillna(NOT_YET).astype(str)
    card["reason"] = card["reason"].fillna(NOT_YET_REASON).astype(str)
    card["row_kind"] = card["row_kind"].astype(object).fillna(verdicts.CLAIM).astype(str)
    card["ours_reading"] = card["ours_reading"].astype(object).fillna(False).astype(bool)
    card = card[[*CARD_COLUMNS, *DATA_COLUMNS, "position"]]
    if len(derived):
        card = pd.concat([card, derived[[*CARD_COLUMNS, *DATA_COLUMNS, "position"]]],
                         ignore_index=True)
    card = card.sort_values("position", kind="stable").drop(columns="position")
    card["our_unit"] = card["our_unit"].astype(object).fillna("").astype(str)
    card["row_kind"] = card["row_kind"].astype(str)
    card["ours_reading"] = card["ours_reading"].astype(object).fillna(False).astype(bool)
    for column in ("our_change", "our_low", "our_high", "cited_change", "expected_sign",
                   "detectable", "detectable_side", "margin", "bound"):
        card[column] = pd.to_numeric(card[column], errors="coerce").astype(float)
    return card.reset_index(drop=True).rename(columns={"table": "measurement"})

