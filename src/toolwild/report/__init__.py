"""User-facing renderings of results: the terminal scoreboard (:mod:`.scoreboard`), a run's self-contained
``report.html`` (:mod:`.html`, its figures in :mod:`.figures`) and ``compare.html`` (:mod:`.compare_html`). A package
because they all render the same metrics and must never recount them."""
