"""The one way a string reaches the HTML report: as text (element content or a quoted
attribute value), or inside JSON in a <script> element.

Text: `&`, `<`, `>`, `"` and `'` become entities. Script JSON: `<`, `>` and `&` become JSON's
\\u escapes, so no label can open a comment, a script or a CDATA section inside the element
(`</script>`, `<!--<script>`, which the browser's script-data states would otherwise act on),
and U+2028/U+2029 too (line terminators to older JavaScript). The JSON parses to the same
values.
"""

from __future__ import annotations

import html
import json
from typing import Any

_SCRIPT_SAFE = str.maketrans(
    {
        "<": "\\u003c",
        ">": "\\u003e",
        "&": "\\u0026",
        "\u2028": "\\u2028",
        "\u2029": "\\u2029",
    }
)


def text(value: object) -> str:
    """Any value as HTML text or a quoted attribute value."""
    return html.escape(str(value), quote=True)


def script_json(data: Any) -> str:
    """`data` as JSON safe inside <script type="application/json"> (NaN refused)."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).translate(_SCRIPT_SAFE)
