"""``POST /api/v1/uploads``: result files of other tools (or a native payload) as one run."""

from typing import Annotated

from benchwatch_client.fields import METADATA, UPLOAD_FIELDS
from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile as StarletteFile

from app.api.deps import IngestToken, SessionDep
from app.api.responses import errors
from app.api.validation import ApiRoute
from app.core import queue
from app.core.errors import ErrorBody
from app.runs.ingest import check_run_time, ingest_run
from app.runs.models import Run
from app.runs.schemas import RunRead
from app.tokens import service as tokens_service
from app.uploads.base import UploadFile
from app.uploads.service import FORMATS, build_run

# Its HTTP errors (auth, a malformed multipart body) answer in the API's one error body too.
router = APIRouter(tags=["uploads"], route_class=ApiRoute)
RAW_NAMES = {"text/csv": "upload.csv", "application/x-ndjson": "upload.jsonl"}
DESCRIPTION = f"""Upload result files as one run (scope `ingest`).

Either `multipart/form-data` with one or more `file` parts, or the file itself as the raw body
(`Content-Type: text/csv`, `application/json` or `application/x-ndjson`; `filename=` names it).
Run metadata as form fields or query parameters: {", ".join(f"`{m}`" for m in METADATA)}.
Without `machine`, the machine's name is the one the files give (a host name), else
`default_machine` (the CI runner's or host's name), suffixed with the device; `provenance`
(a JSON object, field: source) says where the uploader took its fields from. The run's
`extra.provenance` says where each field came from.
`format` is one of {", ".join(f"`{f}`" for f in FORMATS)} (`auto` sniffs each file). Without
`key`, the key is a hash of the files and metadata, so retrying an upload returns the stored
run (200); see docs/formats.md for the mapping of each format.
"""


@router.post(
    "/uploads",
    status_code=201,
    response_model=RunRead,
    description=DESCRIPTION,
    responses={
        200: {"description": "A retry: the run stored earlier under this key"},
        **errors(401, 403, 409),
        400: {"model": ErrorBody, "description": "The multipart body cannot be read"},
        413: {
            "model": ErrorBody,
            "description": "The body is over BENCHWATCH_MAX_BODY_BYTES, a file over a cap of "
            "docs/limits.md, or the files took longer than BENCHWATCH_PARSE_TIMEOUT_S to read: "
            "`errors` name the file and where",
        },
        422: {
            "model": ErrorBody,
            "description": "A file or row is invalid: `errors` name the file, line and field",
        },
    },
)
async def upload(
    request: Request,
    session: SessionDep,
    token: IngestToken,
    response: Response,
    format: Annotated[str, Query(description="file format, or auto")] = "auto",
    filename: Annotated[str | None, Query(description="name of a raw-body file")] = None,
) -> Run:
    """Parse the files, then ingest them as one run (idempotent, all-or-nothing)."""
    files, fields = await _read(request, filename)
    # Off the event loop, and under a deadline: a hostile file cannot hold the server.
    run_in = await run_in_threadpool(
        build_run,
        files,
        fields.pop("format", format),
        fields,
        timeout_s=request.app.state.settings.PARSE_TIMEOUT_S,
    )
    tokens_service.check_machine(token, run_in.machine.name)
    tokens_service.check_project(token, run_in.project, "project")
    check_run_time(run_in, token.scopes, request.app.state.settings, "")
    ingested = await run_in_threadpool(ingest_run, session, run_in, source=f"upload:{token.name}")
    await run_in_threadpool(queue.commit, session)
    if not ingested.created:
        response.status_code = 200
    return ingested.run


async def _read(request: Request, filename: str | None) -> tuple[list[UploadFile], dict[str, str]]:
    """The uploaded files and the metadata (form fields win over query parameters)."""
    fields = {k: v for k, v in request.query_params.items() if k in UPLOAD_FIELDS}
    content_type = request.headers.get("content-type", "").split(";")[0].strip()
    if content_type != "multipart/form-data":
        name = filename or RAW_NAMES.get(content_type, "upload.json")
        return [UploadFile(name, await request.body())], fields
    files = []
    async with request.form() as form:
        for key, value in form.multi_items():
            if isinstance(value, StarletteFile):
                files.append(UploadFile(value.filename or key, await value.read()))
            elif key in (*UPLOAD_FIELDS, "format"):
                fields[key] = value
    return files, fields
