"""The error answers each route declares in OpenAPI, all with the one error body."""

from typing import Any

from app.core.errors import ErrorBody

DESCRIPTIONS = {
    400: "The body is not valid JSON: `detail` gives the line and column",
    401: "No token, or an unknown or revoked one (reads too, with BENCHWATCH_PUBLIC_READ=false)",
    403: "The token lacks the route's scope",
    404: "What the path or a parameter names does not exist",
    409: "The key is stored with a different payload",
    413: "The body is over the size limit (BENCHWATCH_MAX_BODY_BYTES)",
    422: "A parameter or the body is invalid: `errors` say where",
    429: "Too many anonymous reads from this address: `Retry-After` says when to ask again "
    "(BENCHWATCH_ANON_RATE_LIMIT; a token is not limited)",
    503: "The server is busy with as many of these as it computes at once, the database is "
    "unavailable, or a statement ran past BENCHWATCH_STATEMENT_TIMEOUT_S: try again after "
    "`Retry-After`",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these status codes, each with the error body."""
    return {code: {"model": ErrorBody, "description": DESCRIPTIONS[code]} for code in codes}


READS = errors(401, 422, 429)
"""What any read may answer besides its result."""
WRITES = errors(400, 401, 403, 413, 422)
"""What any write with a JSON body may answer besides its result."""
UNAVAILABLE = {
    503: {
        "model": ErrorBody,
        "description": "The database is unavailable, or a statement ran past "
        "BENCHWATCH_STATEMENT_TIMEOUT_S: try again after `Retry-After`",
    }
}
"""What every API route may answer (any of them reads the database): ``ApiRoute`` adds it,
under the route's own 503 if it declares one."""
