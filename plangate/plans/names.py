"""Identifier types for plan arguments. A name that does not match is rejected at validation,
long before it could reach SQL (where it would go through ``psycopg.sql.Identifier`` anyway)."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

_IDENT = r"[A-Za-z_][A-Za-z0-9_]{0,62}"

# "table" or "schema.table"
QualifiedName = Annotated[str, StringConstraints(pattern=rf"^{_IDENT}(\.{_IDENT})?$")]
Identifier = Annotated[str, StringConstraints(pattern=rf"^{_IDENT}$")]
# an S3 bucket name as S3 spells it
BucketName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")]
NonEmpty = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
