"""``trainplan ui``: the planner in the browser (the ``ui`` extra: FastAPI, uvicorn, Jinja2).

A thin layer over the services the CLI calls: :mod:`.state` (the page's inputs, the share link's
query string, the job sections the CLI's flags build), :mod:`.compute` (estimate, launch files,
report), :mod:`.plans` (searches in the background), :mod:`.diagnosis` (OOM messages and logs),
:mod:`.svg` (charts drawn on the server), :mod:`.view` (the templates' choices and filters),
:mod:`.app` (the routes) and :mod:`.server` (uvicorn). htmx (vendored in ``static/``) swaps the
server's HTML in; nothing is fetched from the network. See docs/ui.md.
"""
