"""Every rank's samples of ``%%mpirun --profile`` in one speedscope file (pure): a profile a rank,
frames shared, so that speedscope shows rank 0 and lists the others to switch to.

speedscope's file format (its ``file-format-spec.ts``): ``shared.frames`` holds each frame once
(name, file, line), and a "sampled" profile lists its stacks as indexes into them, outermost
first, each with its weight: here the seconds its samples stand for at the profile's rate.
"""
from __future__ import annotations

import json

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope_json(stacks: dict, rate: float, name: str) -> str:
    """{rank: {frames (outermost first): samples}} sampled at ``rate`` Hz -> the file's text."""
    frames: dict = {}   # {Frame: its index in shared.frames}
    profiles = []
    for rank in sorted(stacks):
        samples, weights = [], []
        for stack, count in sorted(stacks[rank].items(), key=lambda item: -item[1]):
            samples.append([frames.setdefault(frame, len(frames)) for frame in stack])
            weights.append(count / rate)
        profiles.append({"type": "sampled", "name": f"rank {rank}", "unit": "seconds",
                         "startValue": 0, "endValue": sum(weights), "samples": samples, "weights": weights})
    shared = [_frame(frame) for frame in frames]   # (a dict keeps the order indexes were given)
    return json.dumps({"$schema": SCHEMA, "name": name, "exporter": "mlp_magic", "activeProfileIndex": 0,
                       "shared": {"frames": shared}, "profiles": profiles})


def _frame(frame) -> dict:
    described = {"name": frame.function, "file": frame.file}
    if frame.line > 0:   # a native frame has no line
        described["line"] = frame.line
    return described
