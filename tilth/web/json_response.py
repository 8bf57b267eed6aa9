"""The API's JSON response: a file name that is not UTF-8 (a lone surrogate, as
``os.fsdecode`` gives it) is sent as its JSON escape, so it round-trips exactly."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse as _StarletteJSON


class JSONResponse(_StarletteJSON):
    """Starlette's ``JSONResponse``, with ``\\udcXX`` escapes instead of an encoding error."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace")
