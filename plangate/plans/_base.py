"""The base of plangate's records and plan models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """A pydantic model whose validator is built when it is first used, not when its module is
    imported: a client that checks a plan never builds the run report's."""

    model_config = ConfigDict(defer_build=True)
