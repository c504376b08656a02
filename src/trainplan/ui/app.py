"""The web application of ``trainplan ui``: FastAPI routes rendering Jinja2 templates for htmx.

The page is one form; htmx posts it on every change and swaps in the server-rendered results.
Each route reads a :class:`~trainplan.ui.state.State` (query string or form) and calls
:mod:`trainplan.ui.compute`, :mod:`trainplan.ui.plans` or :mod:`trainplan.ui.diagnosis`, which
call the services the CLI calls. Templates autoescape every value (hostile model names, paths,
messages). Static files (htmx, the style sheet, a small script) are served from the package: the
page loads nothing from the network.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader

from trainplan.ui import compute, plans
from trainplan.ui.state import State, from_mapping

HERE = Path(__file__).parent


def _templates() -> Jinja2Templates:
    env = Environment(loader=FileSystemLoader(str(HERE / "templates")), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    from trainplan.ui import view
    env.globals.update(view.GLOBALS)
    env.filters.update(view.FILTERS)
    return Jinja2Templates(env=env)


async def _state(request: Request) -> tuple[State, dict[str, Any]]:
    """The state of a GET's query string or a POST's form, and the form's other values."""
    if request.method == "GET":
        values: dict[str, Any] = dict(request.query_params)
    else:
        values = dict(await request.form())
    return from_mapping(values), values


def _attempt(fn: Any, *args: Any) -> tuple[Any, str | None]:
    """``(fn(*args), None)``, or ``(None, message)`` where it raised one of trainplan's errors
    (the CLI's text for it, :func:`compute.error_text`); anything else propagates."""
    try:
        return fn(*args), None
    except Exception as exc:  # noqa: BLE001 -- trainplan's own errors: the CLI's text
        msg = compute.error_text(exc)
        if msg is None:
            raise
        return None, msg


def _outcome(st: State, err: str | None) -> Any:
    """The estimate of ``st``, or the error that stopped reading it."""
    return compute.estimate_state(st) if err is None else compute.Outcome(st, error=err)


def create_app() -> FastAPI:
    """The application (one per server; searches are kept in :mod:`trainplan.ui.plans`)."""
    app = FastAPI(title="trainplan", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    tpl = _templates()

    def page(request: Request, name: str, state: State, headers: dict[str, str] | None = None,
             **ctx: Any) -> HTMLResponse:
        from trainplan.ui import view
        return tpl.TemplateResponse(request, name, {**view.context(request, state), **ctx},
                                    headers=headers)

    async def checked_state(request: Request) -> tuple[State | None, str | None, dict[str, Any]]:
        try:
            state, values = await _state(request)
        except Exception as exc:  # noqa: BLE001 -- an over-long field: the InputError's text
            msg = compute.error_text(exc)
            if msg is None:
                raise
            return None, msg, {}
        return state, None, values

    @app.get("/", response_class=HTMLResponse)
    async def index(request: Request) -> HTMLResponse:
        state, err, _ = await checked_state(request)
        st = state or State()
        out = _outcome(st, err)
        return page(request, "index.html", st, out=out)

    @app.api_route("/estimate", methods=["GET", "POST"], response_class=HTMLResponse)
    async def estimate(request: Request) -> HTMLResponse:
        t0 = time.perf_counter()
        state, err, _ = await checked_state(request)
        st = state or State()
        out = _outcome(st, err)
        t1 = time.perf_counter()
        resp = page(request, "results.html", st, out=out, oob=True,
                    headers={"HX-Replace-Url": "/?" + st.query()})
        t2 = time.perf_counter()           # Server-Timing: the browser's DevTools show it
        resp.headers["Server-Timing"] = (f"estimate;dur={(t1 - t0) * 1e3:.2f}, "
                                         f"render;dur={(t2 - t1) * 1e3:.2f}")
        return resp

    @app.get("/workspace", response_class=HTMLResponse)
    async def workspace(request: Request) -> HTMLResponse:
        state, err, _ = await checked_state(request)
        st = state or State()
        out = _outcome(st, err)
        return page(request, "workspace.html", st, out=out,     # a row or a framework: a step
                    headers={"HX-Push-Url": "/?" + st.query()})   # back returns to the last

    _plan_routes(app, page, checked_state)
    _file_routes(app, checked_state)
    return app


def _plan_routes(app: FastAPI, page: Any, checked_state: Any) -> None:
    @app.post("/plan", response_class=HTMLResponse)
    async def plan(request: Request) -> HTMLResponse:
        state, err, _ = await checked_state(request)
        if state is None:
            return page(request, "plan.html", State(), search=None, error=err)
        sid, msg = _attempt(plans.start, state)     # too many searches: the InputError's text
        if msg is not None:
            return page(request, "plan.html", state, search=None, error=msg)
        return page(request, "plan.html", state, sid=sid, search=plans.get(sid))

    @app.get("/plan/{sid}", response_class=HTMLResponse)
    async def plan_status(request: Request, sid: str) -> HTMLResponse:
        search = plans.get(sid)
        state = search.state if search is not None else State()
        err = None if search is not None else f"search {sid!r} is not kept any more: run it again"
        return page(request, "plan.html", state, sid=sid, search=search, error=err)

    @app.get("/plan/{sid}/status.json")
    async def plan_json(sid: str) -> JSONResponse:
        search = plans.get(sid)
        if search is None:
            return JSONResponse({"error": "unknown search"}, status_code=404)
        return JSONResponse({"done": search.done, "total": search.total, "phase": search.phase,
                             "seconds": search.elapsed,
                             "finished": search.finished, "error": search.error,
                             "winner": search.result.winner.layout if search.result else None})

    @app.post("/diagnose", response_class=HTMLResponse)
    async def diagnose(request: Request) -> HTMLResponse:
        from trainplan.ui import diagnosis
        state, err, values = await checked_state(request)
        if state is None:
            return page(request, "diagnosis.html", State(), result=None, error=err)
        text, name = await diagnosis.artifact_text(values)
        result, error = diagnosis.run(state, text, name)
        return page(request, "diagnosis.html", state, result=result, error=error)


def _file_routes(app: FastAPI, checked_state: Any) -> None:
    def failed(msg: str) -> Response:
        return Response(msg + "\n", status_code=400, media_type="text/plain; charset=utf-8")

    @app.get("/estimate.json")
    async def estimate_json(request: Request) -> Response:
        state, err, _ = await checked_state(request)
        out = compute.estimate_state(state) if state is not None else None
        if out is None or out.error is not None:
            return JSONResponse({"error": err if out is None else out.error}, status_code=400)
        return Response(out.json_text, media_type="application/json")

    @app.get("/download/launch.zip")
    async def launch(request: Request) -> Response:
        state, err, values = await checked_state(request)
        if state is None:
            return failed(err or "")
        formats = [f for f in str(values.get("formats") or "").split(",") if f] \
            or compute.default_formats(state.framework)
        data, msg = _attempt(compute.launch_zip, state, formats)
        if msg is not None:
            return failed(msg)
        return Response(data, media_type="application/zip",
                        headers={"Content-Disposition": 'attachment; filename="launch.zip"'})

    @app.get("/download/report.html")
    async def report(request: Request) -> Response:
        state, err, _ = await checked_state(request)
        if state is None:
            return failed(err or "")
        text, msg = _attempt(compute.report_html, state)
        if msg is not None:
            return failed(msg)
        return Response(text, media_type="text/html; charset=utf-8",
                        headers={"Content-Disposition": 'attachment; filename="trainplan-report.html"'})
