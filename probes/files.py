"""Local file probes (paths resolve under the work directory)."""

from __future__ import annotations

import asyncio
import stat
from typing import TYPE_CHECKING

from plans.names import NonEmpty
from probes.registry import ProbeArgs, ProbeContext, Verdict, probe

if TYPE_CHECKING:
    from world.clients import World


class FileArgs(ProbeArgs):
    path: NonEmpty


@probe("local_file_nonempty", FileArgs, system="file")
async def local_file_nonempty(args: FileArgs, world: World, ctx: ProbeContext) -> Verdict:
    path = world.path(args.path)
    try:
        st = await asyncio.to_thread(path.stat)
    except FileNotFoundError:
        return Verdict(False, None, f"{args.path} does not exist")
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        return Verdict(False, None, f"{args.path} is {kind}, not a file")
    size = st.st_size
    if size <= 0:
        return Verdict(False, {"size": 0}, f"{args.path} is empty")
    return Verdict(True, {"size": size})
