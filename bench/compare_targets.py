"""compare.py's performance targets, evaluated on the result rows. Reported, never asserted."""

from __future__ import annotations

from compare_shapes import STREAMING_SHAPE, label


def check(target, row, figure, goal, met, unit="x", detail=""):
    """One row's verdict on one target."""
    return {
        "target": target,
        "threads": row["threads"],
        "shape": row["label"],
        "mode": row["mode"],
        "figure": figure,
        "goal": goal,
        "unit": unit,
        "met": bool(met),
        "detail": detail,
    }


def peer_target(rows, peer, goal):
    """rnnfast >= goal x peer, or >= 80% of roofline where the peer is already above 80%."""
    out = []
    for r in rows:
        if r["mode"] == "train" or peer not in r["speedup"]:
            continue
        ratio, mine = r["speedup"][peer], r["libs"]["rnnfast"]["roofline_fraction"]
        peer_frac = r["libs"][peer]["roofline_fraction"]
        near_roof = peer_frac > 0.8
        met = ratio >= goal or (near_roof and mine >= 0.8)
        detail = f"{peer} at {100 * peer_frac:.0f}% of roofline, rnnfast {100 * mine:.0f}%"
        out.append(
            check(
                f"inference >= {goal}x {peer} (or >= 80% roofline if {peer} > 80%)",
                r,
                ratio,
                goal,
                met,
                detail=detail if near_roof else "",
            )
        )
    return out


def reference_targets(rows):
    """>= 1x the NumPy reference everywhere, >= 2x where H <= 256."""
    out = []
    for r in rows:
        ratio = r["speedup"]["numpy"]
        out.append(check(">= 1x NumPy reference, every shape and mode", r, ratio, 1.0, ratio >= 1))
        if r["shape"]["H"] <= 256:
            out.append(check(">= 2x NumPy reference where H <= 256", r, ratio, 2.0, ratio >= 2))
    return out


def training_targets(rows):
    """Training >= 3x torch, or >= 70% of the training roofline."""
    out = []
    for r in rows:
        if r["mode"] != "train":
            continue
        ratio, frac = r["speedup"]["torch"], r["libs"]["rnnfast"]["roofline_fraction"]
        out.append(
            check(
                "training >= 3x torch or >= 70% of training roofline",
                r,
                ratio,
                3.0,
                ratio >= 3 or frac >= 0.7,
                detail=f"roofline {100 * frac:.0f}%",
            )
        )
    return out


def streaming_targets(rows):
    """The streaming shape's forward: at most 0.25 us per time step."""
    name = label(STREAMING_SHAPE)
    out = []
    for r in rows:
        if r["label"] == name and r["mode"] in ("fwd_seq", "fwd_last"):
            per_step_us = r["libs"]["rnnfast"]["median_ms"] * 1e3 / r["shape"]["T"]
            out.append(
                check(
                    f"streaming {name}: forward per step <= 0.25 us",
                    r,
                    per_step_us,
                    0.25,
                    per_step_us <= 0.25,
                    unit="us",
                )
            )
    return out


def scaling_targets(rows):
    """2 threads vs 1: >= 1.7x throughput where H >= 512, never slower anywhere."""
    one = {(r["label"], r["mode"]): r for r in rows if r["threads"] == 1}
    out = []
    for r in rows:
        if r["threads"] != 2 or (r["label"], r["mode"]) not in one:
            continue
        speedup = (
            one[(r["label"], r["mode"])]["libs"]["rnnfast"]["median_ms"]
            / r["libs"]["rnnfast"]["median_ms"]
        )
        out.append(check("2 threads never slower than 1", r, speedup, 1.0, speedup >= 1.0))
        if r["shape"]["H"] >= 512:
            out.append(
                check("2 threads >= 1.7x 1 thread where H >= 512", r, speedup, 1.7, speedup >= 1.7)
            )
    return out


def evaluate_targets(rows: list) -> list:
    """The project's performance targets, on the float32 rows only. Reported, never asserted."""
    f32 = [r for r in rows if r["dtype"] == "float32"]
    return (
        peer_target(f32, "torch", 3.0)
        + peer_target(f32, "ort", 1.5)
        + reference_targets(f32)
        + training_targets(f32)
        + streaming_targets(f32)
        + scaling_targets(f32)
    )
