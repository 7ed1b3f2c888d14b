"""2026-07-28 `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` headers disagreeing with the body, accepted.

In the 2026-07-28 era the request headers mirror the JSON-RPC body so that intermediaries can
route on them: `Mcp-Method` is `method`, `Mcp-Name` is `params.name` (`tools/call`,
`prompts/get`) or `params.uri` (`resources/read`), and `Mcp-Param-<token>` is the argument whose
input-schema property carries `x-mcp-header: <token>` (from a captured `tools/list`). A server
MUST reject a mismatch; flagged is one it answered 2xx (medium: a gateway routed, authorized or
rate-limited on a value the server did not execute). Values are compared after decoding the
`=?base64?...?=` sentinel, so base64-wrapped values that decode equal are not flagged; integer
arguments compare numerically; a header whose body value is absent is not judged, nor an
`Mcp-Param-*` header of a tool whose schema was not captured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from analyzer.detection import Detector
from analyzer.findings import Severity, emit, finding_rows
from analyzer.timeline import disagreements
from analyzer.wording import text

if TYPE_CHECKING:
    from analyzer.timeline import Timeline

REMEDY: Final = (
    "Servers must validate the Mcp-* headers against the body and answer 400 "
    "(HEADER_MISMATCH); clients should build the headers from the body they send."
)


def detect(timeline: Timeline) -> pl.LazyFrame:
    """One finding per session and header name whose value disagreed with an accepted body."""
    wrong = disagreements.accepted(timeline)
    if wrong is None:
        return finding_rows([])
    return emit(
        wrong,
        title=text(
            "{name} disagrees with the body of {n} accepted request(s)",
            n=pl.col("flow_ids").list.len(),
        ),
        detail=text(
            "Session {session_id}: the server answered 2xx to request(s) whose {name} header "
            "disagrees with the JSON-RPC body (after base64-sentinel decoding): {pairs}. Gateways "
            "route, authorize and rate-limit on these headers, so the request was handled on a "
            "value the server did not execute.",
            pairs=pl.col("_pairs").list.join("; "),
        ),
        remedy=REMEDY,
        flow_ids="flow_ids",
        request_ids="request_ids",
    )


DETECTOR: Final[Detector] = Detector(
    id="header-mismatch", severity=Severity.MEDIUM, description=__doc__ or "", detect=detect,
    remedy=REMEDY,
)  # fmt: skip
