"""compare's performance targets (issue 13), evaluated on the result rows: every check says met
or missed with its figure. Reported, never asserted.

    float32   forward >= 1.25x torch and >= 1.5x ONNX Runtime; training >= 1.25x torch;
              where H <= 128, >= 3x torch (forward and training)
    float64   forward and training >= 1.2x torch float64 and >= 1.2x the NumPy loop
    roofline  where a multiple would take rnnfast past its roofline (the peer already runs at more
              than 1/multiple of it), 85% of the roofline meets a forward target and 80% a
              training one; issue 13 says so for float32, and it is applied to float64 alike, as
              a target faster than the roofline cannot be met there either. Not on a row where
              rnnfast or the peer runs above 100% of the roofline: that roofline was measured
              low (a busy machine) and is not the row's limit
    per ISA   on an AVX-512 machine the avx512 kernels beat avx2 on every shape with B >= 8
              (needs rnnfast timed on both: compare --isas)
    streaming 200x1x32x64 forward at most 0.25 us per step, on every ISA timed
    threads   2 threads never slower than 1; >= 1.8x 1 thread where H >= 512, forward and training

Issue 3's older targets (inference >= 3x torch everywhere, training >= 3x torch or 70% of the
roofline, >= 1x / 2x the NumPy reference in float32) are replaced by these: issue 13 sets the
multiples over torch it asks for now, and beating the NumPy loop in float32 says little next to
beating torch (float64 keeps a NumPy-loop target, as NumPy's default dtype).
"""

from __future__ import annotations

from bench.peers.compare.shapes import STREAMING_SHAPE, label

FORWARD = ("fwd_seq", "fwd_last")
ROOF_SHARE = {"fwd_seq": 0.85, "fwd_last": 0.85, "train": 0.80}


def check(target, row, figure, goal, met, unit="x", detail=""):
    """One row's verdict on one target."""
    return {
        "target": target,
        "dtype": row["dtype"],
        "threads": row["threads"],
        "shape": row["label"],
        "grid": row.get("grid", True),
        "mode": row["mode"],
        "figure": figure,
        "goal": goal,
        "unit": unit,
        "met": bool(met),
        "detail": detail,
    }


def multiple_of_peer(row, peer, goal, target):
    """rnnfast >= goal x peer on one row; where goal x peer's speed lies beyond the roofline
    (peer's roofline fraction x goal > 1), ROOF_SHARE[mode] of the roofline meets it too.

    A roofline that rnnfast or the peer beats on this row was measured low (a busy machine, data
    that stays in cache): it is not this row's limit, so it cannot stand in for the multiple."""
    ratio = row["speedup"][peer]
    mine = row["libs"]["rnnfast"]["roofline_fraction"]
    peer_frac = row["libs"][peer]["roofline_fraction"]
    share = ROOF_SHARE[row["mode"]]
    beyond = goal * peer_frac > 1.0
    capped = beyond and max(mine, peer_frac) <= 1.0
    met = ratio >= goal or (capped and mine >= share)
    detail = ""
    if capped:
        detail = (
            f"{goal}x {peer} is beyond the roofline ({peer} at {100 * peer_frac:.0f}%): "
            f"rnnfast at {100 * mine:.0f}%, {100 * share:.0f}% meets it"
        )
    elif beyond:
        detail = (
            f"roofline beaten (rnnfast {100 * mine:.0f}%, {peer} {100 * peer_frac:.0f}%): "
            "measured low, so no roofline cap"
        )
    return check(target, row, ratio, goal, met, detail=detail)


def peer_targets(rows, dtype, peer, goal, modes, name, where=lambda r: True):
    """multiple_of_peer on every row of a dtype and mode that has the peer and passes where."""
    return [
        multiple_of_peer(r, peer, goal, f"{dtype} {name}")
        for r in rows
        if r["dtype"] == dtype and r["mode"] in modes and peer in r["speedup"] and where(r)
    ]


def small_hidden(row) -> bool:
    return row["shape"]["H"] <= 128


def float32_targets(rows):
    return (
        peer_targets(rows, "float32", "torch", 1.25, FORWARD, "forward >= 1.25x torch")
        + peer_targets(rows, "float32", "ort", 1.5, FORWARD, "forward >= 1.5x ONNX Runtime")
        + peer_targets(rows, "float32", "torch", 1.25, ("train",), "training >= 1.25x torch")
        + peer_targets(
            rows,
            "float32",
            "torch",
            3.0,
            (*FORWARD, "train"),
            "H <= 128: >= 3x torch",
            small_hidden,
        )
    )


def float64_targets(rows):
    both = (*FORWARD, "train")
    return peer_targets(
        rows, "float64", "torch", 1.2, both, "forward and training >= 1.2x torch"
    ) + peer_targets(rows, "float64", "numpy", 1.2, both, "forward and training >= 1.2x NumPy loop")


def isa_targets(rows):
    """avx512 beats avx2 where B >= 8: avx2's time / avx512's > 1, from alternating repeats."""
    out = []
    for r in rows:
        isas = r.get("isas", {})
        if r["shape"]["B"] < 8 or "avx512" not in isas or "avx2" not in isas:
            continue
        ratio = isas["avx2"]["median_ms"] / isas["avx512"]["median_ms"]
        out.append(
            check(
                f"{r['dtype']} avx512 beats avx2 where B >= 8 (avx2 time / avx512 time)",
                r,
                ratio,
                1.0,
                ratio > 1.0,
            )
        )
    return out


def streaming_targets(rows):
    """The streaming shape's forward: at most 0.25 us per time step, on each ISA timed."""
    name = label(STREAMING_SHAPE)
    out = []
    for r in rows:
        if r["label"] != name or r["mode"] not in FORWARD or r["dtype"] != "float32":
            continue
        per_isa = r.get("isas") or {r.get("active_isa", "active isa"): r["libs"]["rnnfast"]}
        for isa, figures in per_isa.items():
            per_step_us = figures["median_ms"] * 1e3 / r["shape"]["T"]
            out.append(
                check(
                    f"float32 streaming {name}: forward <= 0.25 us per step ({isa})",
                    r,
                    per_step_us,
                    0.25,
                    per_step_us <= 0.25,
                    unit="us",
                )
            )
    return out


def scaling_targets(rows):
    """2 threads vs 1 (rnnfast's times): never slower anywhere, >= 1.8x where H >= 512."""
    one = {(r["dtype"], r["label"], r["mode"]): r for r in rows if r["threads"] == 1}
    out = []
    for r in rows:
        key = (r["dtype"], r["label"], r["mode"])
        if r["threads"] != 2 or key not in one:
            continue
        speedup = one[key]["libs"]["rnnfast"]["median_ms"] / r["libs"]["rnnfast"]["median_ms"]
        dtype = r["dtype"]
        out.append(check(f"{dtype} 2 threads never slower than 1", r, speedup, 1.0, speedup >= 1))
        if r["shape"]["H"] >= 512:
            out.append(
                check(
                    f"{dtype} 2 threads >= 1.8x 1 thread where H >= 512",
                    r,
                    speedup,
                    1.8,
                    speedup >= 1.8,
                )
            )
    return out


def evaluate_targets(rows: list) -> list:
    """Every target on every row it applies to (grid and extra shapes alike)."""
    return (
        float32_targets(rows)
        + float64_targets(rows)
        + isa_targets(rows)
        + streaming_targets(rows)
        + scaling_targets(rows)
    )
