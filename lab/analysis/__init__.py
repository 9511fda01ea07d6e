"""What the notebooks compute from committed runs: the cited numbers (:mod:`.cited`), the runs
(:mod:`.runs`), changes with their intervals (:mod:`.stats`), what a change is judged against
(:mod:`.quantities`), the verdict rule (:mod:`.verdicts`), the scorecard (:mod:`.scorecard`,
:mod:`.views`, :mod:`.headlines`) and the chapters' judges (:mod:`.judges`). It reads data/ and
never runs a stage."""
