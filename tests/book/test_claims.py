"""Every sentence of book/ that states a direction or a size is computed or asserted.

A sentence with a direction word (any comparative, "falls", "rises", "no change", "does not
follow", "tens of percent", ...) must either paste a phrase the notebook computes (a
``{glue:text}`` role in the same sentence), or be listed in :data:`TYPED` with what backs it:

* ``("asserted", "<notebook>", "<claim key>")``: the notebook calls
  ``notebook.claim("<claim key>", ...)``, which fails the build when the data disagree;
* ``("not ours", "<why>")``: the sentence states no result of ours (the author's claim, what the
  code does, the series' history, an expectation stated before the data).

The test fails on a typed directional sentence that is not listed, on a listed sentence that no
longer exists, and on an asserted claim that its notebook does not make.
"""

from __future__ import annotations

import re

import pytest

from lab import ROOT

WORDS = re.compile(
    r"\b((?:larg|small|few|high|low|fast|slow|(?<!no )long|short|bigg|great|wid|narrow|steadi|"
    r"cheap|quick|rar)er|(?<!once )(?<!one )more(?! importantly)|less|worse|better|"
    r"falls?|falling|fell|rises?|rising|rose|drops?|dropped|grows?|grew|grown|growing|"
    r"shrinks?|shrank|shrunk|shrinking|halves|halved|halving|doubles?|doubled|doubling|"
    r"triples?|tripled|increases?|increased|increasing|decreases?|decreased|decreasing|"
    r"reduces?|reduced|reducing|no change|unchanged|does not follow|follows it|"
    r"tens of percent|hundreds of percent|hundreds of times|few percent|byte-for-byte|"
    r"stays? flat)\b",
    re.IGNORECASE)
"""Words and phrases that state a direction or a size: every comparative ("larger", "fewer",
"more", "less", "slower", ...) and every verb of change ("rises", "drops", "halves", ...), so a
sentence that compares cannot slip through for want of a listed word. Idioms that compare
nothing ("no longer", "one more", "once more", "more importantly") are left out."""

GLUE = "{glue:text}`"

AUTHOR = "the author's or a reviewer's statement, not a result of ours"
CODE = "what the code or the toolchain does, not a measurement"
HISTORY = "the series' history"
RULE = "states the verdict rule, not a result"
METHOD = "what an emulator can show in general, stated before any data"
READING = ("our reading of the code, marked as such in the sentence; the counts it explains are "
           "glued")
DESIGN = "a decision about the experiment, not a result"

TYPED: dict[tuple[str, str], tuple[str, ...]] = {
    ("context-switch.md", "Gleixner's review of 1/3 asked to drop"): ("not ours", HISTORY),
    ("context-switch.md", "On the AMD machine the author saw no change at all"):
        ("not ours", AUTHOR),
    ("context-switch.md", "A bzImage stores the kernel compressed and grows only"):
        ("not ours", CODE),
    ("context-switch.md", "That is the code an unchanged bzImage hides."):
        ("not ours", "refers to the glued size comparison of the preceding sentences"),
    ("context-switch.md", "So under TCG the option changes nothing on the switch path"):
        ("not ours", "follows from the glued IBPB counts of the preceding sentence"),
    ("io-wq.md", "no longer takes and drops references"): ("not ours", CODE),
    ("io-wq.md", "When spinning shrinks, the other symbols' shares grow"): ("not ours", CODE),
    ("io-wq.md", "The patch had meanwhile been applied; on 2025-02-04 he asked Jens to drop it"):
        ("not ours", HISTORY),
    ("method.md", "The guest kernel runs unchanged and is functionally exact"):
        ("not ours", CODE),
    ("method.md", "A change whose whole interval lies inside its margin is *no change at this"):
        ("not ours", RULE),
    ("pipeline.md", "`ACCEL=auto` probes KVM by booting real guests"): ("not ours", CODE),
    ("qpw.md", "Shrinking a cache, destroying it"): ("not ours", CODE),
    ("qpw.md", "Posted by Marcelo Tosatti on 2026-02-06"): ("not ours", HISTORY),
    ("qpw.md", "With the key off, the helpers fall back to `local_lock_t`"): ("not ours", CODE),
    ("qpw.md", "adds `include/linux/pwlocks.h`"): ("not ours", CODE),
    ("sched-ext.md", "Otherwise the code falls through to `schedule_deferred()`"):
        ("not ours", CODE),
    ("scorecard.md", "A cited \"no change\" is reproduced by an interval that lies wholly"):
        ("not ours", RULE),
    ("scorecard.md", "our whole interval lies inside the metric's margin where the author saw"):
        ("not ours", RULE),
    ("scorecard.md", "A mechanism row is judged by the same intervals and margins"):
        ("not ours", RULE),
    ("workqueue.md", "adds the task to an on-stack `wake_q` under the lock"): ("not ours", CODE),
    ("workqueue.md", "The code is the posting's, unchanged."): ("not ours", HISTORY),
    ("workqueue.md", "Where an interval excludes the author's change, any change here is"):
        ("not ours", RULE),
    ("workqueue.md", "*v3* and *v4* shrink the series"): ("not ours", HISTORY),
    ("workqueue.md", "*v5* returns to a plain `wake_up_process()`"): ("not ours", HISTORY),
    ("workqueue.md", "Breno Leitao's series \"workqueue: Shrink the lock time\""):
        ("not ours", HISTORY),
    ("workqueue.md", "This changes what \"contention\" means"): ("not ours", CODE),
    ("workqueue.md", "* whether the series shortens the `pool->lock` critical section"):
        ("not ours", "an expectation stated before the data"),
    ("workqueue.md", "The acquisitions agree between the kernels to within a few percent"):
        ("asserted", "notebooks/workqueue.md", "workqueue-acquisitions-agree"),
    ("context-switch.md", "GCC inlines a static function that has exactly one call site"):
        ("not ours", CODE),
    ("context-switch.md", "A TSC tick is at most a couple of core cycles"):
        ("asserted", "notebooks/context-switch.md", "cs-author-levels-beyond-the-core"),
    ("context-switch.md", "Either the printed figure is not the time of one call"):
        ("asserted", "notebooks/context-switch.md", "cs-author-levels-beyond-the-core"),
    ("io-wq.md", "Six of them were merged for 6.15"): ("not ours", HISTORY),
    ("io-wq.md", "It is a clean example of the \"fewer cycles under a hot lock\""):
        ("not ours", "names the style of the series' optimization"),
    ("io-wq.md", "After unlocking, `io_wq_activate_free_worker()` walked"): ("not ours", CODE),
    ("io-wq.md", "so `io_get_next_work()` and the enqueue path do fewer atomic reads"):
        ("not ours", CODE),
    ("io-wq.md", "Jens agreed that io-wq needs a better scheme"): ("not ours", AUTHOR),
    ("io-wq.md", "so after the first wakeup nobody re-arms the flag"): ("not ours", CODE),
    ("io-wq.md", "Jens, reluctant to add more epoll logic"): ("not ours", HISTORY),
    ("io-wq.md", "The earlier plan of an `-icount` run is dropped"): ("not ours", DESIGN),
    ("io-wq.md", "On two vCPUs the spinning is a far smaller part of the profile"):
        ("asserted", "notebooks/io-wq.md", "io-wq-nop-slowpath-smaller-share"),
    ("io-wq.md", "Our reading, not a measurement: without the wait-queue lock"):
        ("not ours", READING),
    ("io-wq.md", "We had read shorter critical sections as fewer contended acquisitions"):
        ("not ours", "the reading of ours the contentions row tests, stated before the data; "
                     "its verdict is glued in the next sentence"),
    ("method.md", "the pipeline then checks that every option it asked for survived"):
        ("not ours", CODE),
    ("method.md", "a longer critical section still makes other vCPUs wait longer"):
        ("not ours", METHOD),
    ("method.md", "because emulated vCPUs are host threads on a host with fewer cores"):
        ("not ours", METHOD),
    ("pipeline.md", "upstream 7.2.13 less the few files Debian removes"):
        ("not ours", "'less' subtracts files from a tree, it compares nothing"),
    ("pipeline.md", "upstream's tree less the paths in `Files-Excluded`"):
        ("not ours", "'less' subtracts files from a tree, it compares nothing"),
    ("pipeline.md", "Dropped option : `olddefconfig dropped or changed"): ("not ours", CODE),
    ("qpw.md", "The v1 thread turned into a design discussion"): ("not ours", HISTORY),
    ("qpw.md", "by our reading of the patched tree it need not"): ("not ours", CODE),
    ("qpw.md", "Here that message is `Watchdog remote CPU 1 read timed out`"): ("not ours", CODE),
    ("qpw.md", "The notebook pools each variant's boots from every run"): ("not ours", CODE),
    ("qpw.md", "The timed kernels lack `CONFIG_BUG` too"): ("not ours", CODE),
    ("qpw.md", "3/4 drops the static initialisers of the LRU batches' locks"): ("not ours", CODE),
    ("qpw.md", "On `PREEMPT_RT` the boot with the default unpack reported"):
        ("asserted", "notebooks/qpw.md", "qpw-init-rt-wait-lock"),
    ("qpw.md", "so remote work fits better than extra work on every system call"):
        ("not ours", AUTHOR),
    ("sched-ext.md", "this is the fallback for the cases the cheaper hooks cannot cover"):
        ("not ours", CODE),
    ("sched-ext.md", "a sample the author gives as more than a million tasks per set"):
        ("not ours", AUTHOR),
    ("sched-ext.md", "In this guest, then, the handler of a remote fallback does not run"):
        ("asserted", "notebooks/sched-ext.md", "sched-ext-remote-wait-not-shorter"),
    ("workqueue.md", "`pool->lock` is one of the more widely shared raw spinlocks"):
        ("not ours", CODE),
    ("workqueue.md", "and four more postings were needed to close it"): ("not ours", HISTORY),
    ("workqueue.md", "calls `kick_pool()` again when more items are waiting"): ("not ours", CODE),
    ("workqueue.md", "is false with two or fewer idle"): ("not ours", CODE),
    ("workqueue.md", "Second, from our reading of the code and not observed"): ("not ours", CODE),
    ("workqueue.md", "his tag was dropped in v5"): ("not ours", HISTORY),
    ("workqueue.md", "ours from an emulator that runs the same code far more slowly"):
        ("asserted", "notebooks/workqueue.md", "workqueue-emulator-slower"),
    ("workqueue.md", "A shorter critical section should make the slow regime rarer"):
        ("not ours", "an expectation and a caution; the queueing shares it points to are "
                     "glued in the sentences before"),
    ("workqueue.md", "its TSC has run ahead by more than a tick"): ("not ours", CODE),
    ("workqueue.md", "When that happens to more than half of a boot's calls"):
        ("not ours", "what a median is"),
    ("workqueue.md", "The baseline's long average at `system` is itself the emulator at work"):
        ("asserted", "notebooks/workqueue.md", "workqueue-system-hold-longest"),
    ("workqueue.md", "Our reading, not a measurement: a worker woken after the unlock"):
        ("not ours", READING),
    ("workqueue.md", "Nor does our throughput pin the author's size at any scope"):
        ("asserted", "notebooks/workqueue.md", "workqueue-no-informative-throughput"),
    ("workqueue.md", "The *mechanism* rows are LOCK_STAT's counts of `pool->lock`"):
        ("asserted", "notebooks/workqueue.md", "workqueue-acquisitions-are-ours"),
}


def sentences(text: str) -> list[str]:
    """The prose sentences of a MyST page: code blocks, directive blocks, tables and labels
    are left out, paragraphs joined and split after a full stop."""
    paragraphs, lines, fenced, directive = [], [], False, False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if stripped.startswith(":::"):
            directive = stripped.startswith(":::{")
            continue
        skip = (fenced or directive or stripped.startswith(("|", "%", "#"))
                or re.fullmatch(r"\(.*\)=", stripped) is not None)
        if skip or not stripped:
            if lines:
                paragraphs.append(" ".join(lines))
                lines = []
            continue
        lines.append(stripped)
    if lines:
        paragraphs.append(" ".join(lines))
    return [s for p in paragraphs for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*{`(])", p)]


def typed_directional_sentences() -> list[tuple[str, str]]:
    """(page, sentence) of every sentence of book/ with a direction word and no glued phrase."""
    found = []
    for page in sorted((ROOT / "book").glob("*.md")):
        for sentence in sentences(page.read_text(encoding="utf-8")):
            if WORDS.search(sentence) and GLUE not in sentence:
                found.append((page.name, sentence))
    return found


def backing(page: str, sentence: str) -> tuple[str, ...] | None:
    for (listed_page, start), backed in TYPED.items():
        if listed_page == page and start in sentence:
            return backed
    return None


def test_every_typed_directional_sentence_is_backed() -> None:
    unbacked = [f"book/{page}: {sentence}" for page, sentence in typed_directional_sentences()
                if backing(page, sentence) is None]
    assert not unbacked, (
        "directional sentences typed without a glued phrase or a notebook assertion. Fix: glue "
        "the phrase the notebook computes, or add notebook.claim(...) and list the sentence in "
        "tests/book/test_claims.py:\n" + "\n".join(unbacked))


def test_every_listed_sentence_still_exists() -> None:
    typed = typed_directional_sentences()
    stale = [key for key in TYPED
             if not any(page == key[0] and key[1] in sentence for page, sentence in typed)]
    assert not stale, f"listed in TYPED but no longer typed in book/: {stale}"


@pytest.mark.parametrize("key", [k for k, v in TYPED.items() if v[0] == "asserted"])
def test_an_asserted_sentence_has_its_claim_in_the_notebook(key: tuple[str, str]) -> None:
    _, notebook, claim = TYPED[key]
    source = (ROOT / notebook).read_text(encoding="utf-8")
    assert re.search(rf"notebook\.claim\(\s*\"{re.escape(claim)}\"", source), (
        f"{notebook} makes no notebook.claim({claim!r}, ...) for book/{key[0]}: {key[1]}")


@pytest.mark.parametrize(("text", "flagged"), [
    ("The average wait time does not follow: under emulation a waiter waits.", True),
    ("The hold time falls by {glue:text}`/notebooks/x.md::k`.", False),
    ("```text\nthe value falls\n```", False),
    ("an interval tens of percent wide cannot tell", True),
    ("The patched kernel takes the lock fewer times.", True),
    ("Its hold time is larger with the series.", True),
    ("The two classes no longer serialise on one lock.", False),
    ("This is one more reason, and more importantly a rule.", False),
])
def test_the_scan_flags_typed_directions_only(text: str, flagged: bool) -> None:
    hits = [s for s in sentences(text) if WORDS.search(s) and GLUE not in s]
    assert bool(hits) == flagged
