"""The book's Sphinx side and the notebooks' presentation: the extension (:mod:`.sphinxext`
with :mod:`.freshness`, :mod:`.paste` and :mod:`.pages`), notebook helpers (:mod:`.notebook`),
figures and panels, provenance boxes, claim markers and forward diffs."""
