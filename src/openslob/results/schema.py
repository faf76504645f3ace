"""run.json's JSON Schema: shipped with the tool (openslob/data/run.schema.json), versioned
with SCHEMA_VERSION, and what the tests validate every run.json they make against (with the
jsonschema package, a test dependency): the file and its renderers cannot drift apart
unnoticed. A new top-level block must be declared there (the schema refuses unknown keys)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from openslob.results.rundir import SCHEMA_VERSION

SCHEMA_FILE = "run.schema.json"


@cache
def run_schema() -> dict[str, Any]:
    """The schema of run.json files this version writes (schema_version SCHEMA_VERSION)."""
    text = resources.files("openslob").joinpath("data", SCHEMA_FILE).read_text()
    schema = json.loads(text)
    if schema["properties"]["schema_version"]["const"] != SCHEMA_VERSION:
        raise RuntimeError(f"{SCHEMA_FILE} is not of schema_version {SCHEMA_VERSION}")
    return schema


def validate_run(run: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when `run` does not follow the schema."""
    import jsonschema  # a test dependency: the tool itself never needs it

    jsonschema.validate(run, run_schema(), cls=jsonschema.Draft202012Validator)
