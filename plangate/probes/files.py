"""Local file probes (paths resolve in the run's own directory under the work directory)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from plangate.plans.names import NonEmpty
from plangate.probes.registry import ProbeArgs, ProbeContext, Verdict, probe
from plangate.world.paths import NotAFile

if TYPE_CHECKING:
    from plangate.world.clients import World


class FileArgs(ProbeArgs):
    path: NonEmpty


@probe("local_file_nonempty", FileArgs, system="file")
async def local_file_nonempty(args: FileArgs, world: World, ctx: ProbeContext) -> Verdict:
    try:
        size = await asyncio.to_thread(ctx.files.size, args.path)
    except NotAFile as e:
        return Verdict(False, None, str(e))
    if size is None:
        return Verdict(False, None, f"{args.path} does not exist")
    if size <= 0:
        return Verdict(False, {"size": 0}, f"{args.path} is empty")
    return Verdict(True, {"size": size})
