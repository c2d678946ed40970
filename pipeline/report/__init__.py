"""``doit report``: a static HTML page of the library (``build/report/index.html``) with one row per asset,
and a page per asset, from the verify results and images rendered from each USD output."""
