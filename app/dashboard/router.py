"""The dashboard's routers, as ``app.main`` mounts them.

``assets``: open to all (plotly.js, from the installed ``plotly`` package: no CDN; signing in
and out). ``pages``: the pages and their forms, behind page access (``app.dashboard.access``).
"""

from fastapi import APIRouter
from fastapi.responses import FileResponse

from app.dashboard import forms, login
from app.dashboard import pages as views
from app.dashboard.shell import PLOTLY_JS, OpenFormRoute

assets = APIRouter(include_in_schema=False, route_class=OpenFormRoute)


@assets.get("/static/plotly.min.js")
def plotly_js() -> FileResponse:
    """The plotly.js bundle of the installed ``plotly`` package (works air-gapped)."""
    return FileResponse(
        PLOTLY_JS, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"}
    )


assets.include_router(login.router)

pages = APIRouter(include_in_schema=False)
pages.include_router(views.router)
pages.include_router(forms.router)
