"""compare's performance targets (issue 13 for the Elman cell, issue 23 for the gated cells),
evaluated on the result rows: every check says met or missed with its figure. Reported, never
asserted.

Elman cell (issue 13):

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

Every cell:

    threads   2 threads never slower than 1; >= 1.8x 1 thread where H >= 512, forward and training

GRU and LSTM (issue 23), float32, each against the peers measured in the same run:

    H <= 256  forward >= 1.5x the fastest of torch, ONNX Runtime, OpenVINO and JAX, capped at 85%
              of the roofline; training >= 1.5x the faster of torch and JAX, capped at 80%
    H > 256   1.25x, capped at 90% (forward) and 85% (training). Issue 23 says H >= 512; it is
              silent on 256 < H < 512 (the extra shapes' 300), which gets the lesser multiple
    cost      a training step at most 3x (GRU) and 4x (LSTM) the Elman step of the same shape and
              thread count (the FLOP ratio); needs the Elman rows in the same run

"R x the peer, capped at C of the roofline" means, for the gated cells as issue 23 words it: at
least R x the fastest peer's speed, or at least C x the roofline where R x the peer lies beyond C
x the roofline (multiple_of_peer with cap_above=C). The Elman targets keep issue 13's form: the cap
applies only where R x the peer lies beyond the roofline itself (cap_above=1).

Issue 3's older targets (inference >= 3x torch everywhere, training >= 3x torch or 70% of the
roofline, >= 1x / 2x the NumPy reference in float32) are replaced by these: issue 13 sets the
multiples over torch it asks for now, and beating the NumPy loop in float32 says little next to
beating torch (float64 keeps a NumPy-loop target, as NumPy's default dtype).
"""

from __future__ import annotations

from bench.peers.compare.shapes import STREAMING_SHAPE, label

FORWARD = ("fwd_seq", "fwd_last")
ROOF_SHARE = {"fwd_seq": 0.85, "fwd_last": 0.85, "train": 0.80}


def cell_of(row) -> str:
    """A row's cell; rows written before the gated cells are the Elman cell's."""
    return row.get("cell", "rnn")


def check(target, row, figure, goal, met, unit="x", detail="", peer=None, at_most=False):
    """One row's verdict on one target; at_most: the figure must not exceed the goal."""
    return {
        "target": target,
        "dtype": row["dtype"],
        "threads": row["threads"],
        "cell": cell_of(row),
        "shape": row["label"],
        "grid": row.get("grid", True),
        "mode": row["mode"],
        "figure": figure,
        "goal": goal,
        "unit": unit,
        "met": bool(met),
        "detail": detail,
        "peer": peer,
        "at_most": at_most,
    }


def multiple_of_peer(row, peer, goal, target, share=None, cap_above=1.0):
    """rnnfast >= goal x peer on one row; where goal x peer's speed lies beyond cap_above x the
    roofline (peer's roofline fraction x goal > cap_above), share (default ROOF_SHARE[mode]) of
    the roofline meets it too.

    A roofline that rnnfast or the peer beats on this row was measured low (a busy machine, data
    that stays in cache): it is not this row's limit, so it cannot stand in for the multiple."""
    ratio = row["speedup"][peer]
    mine = row["libs"]["rnnfast"]["roofline_fraction"]
    peer_frac = row["libs"][peer]["roofline_fraction"]
    share = ROOF_SHARE[row["mode"]] if share is None else share
    beyond = goal * peer_frac > cap_above
    capped = beyond and max(mine, peer_frac) <= 1.0
    met = ratio >= goal or (capped and mine >= share)
    detail = ""
    if capped:
        detail = (
            f"{goal}x {peer} is beyond {100 * cap_above:.0f}% of the roofline ({peer} at "
            f"{100 * peer_frac:.0f}%): "
            f"rnnfast at {100 * mine:.0f}%, {100 * share:.0f}% meets it"
        )
    elif beyond:
        detail = (
            f"roofline beaten (rnnfast {100 * mine:.0f}%, {peer} {100 * peer_frac:.0f}%): "
            "measured low, so no roofline cap"
        )
    return check(target, row, ratio, goal, met, detail=detail, peer=peer)


def peer_targets(rows, dtype, peer, goal, modes, name, where=lambda r: True):
    """multiple_of_peer on every Elman row of a dtype and mode that has the peer and passes
    where."""
    return [
        multiple_of_peer(r, peer, goal, f"{dtype} {name}")
        for r in rows
        if cell_of(r) == "rnn"
        and r["dtype"] == dtype
        and r["mode"] in modes
        and peer in r["speedup"]
        and where(r)
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
        if cell_of(r) != "rnn" or r["shape"]["B"] < 8 or "avx512" not in isas or "avx2" not in isas:
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
        if cell_of(r) != "rnn":
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
                    at_most=True,
                )
            )
    return out


def cell_prefix(row) -> str:
    """'' for the Elman cell (issue 13's target names), 'gru ' / 'lstm ' for the gated ones."""
    return "" if cell_of(row) == "rnn" else f"{cell_of(row)} "


def scaling_targets(rows):
    """2 threads vs 1 (rnnfast's times), every cell: never slower anywhere, >= 1.8x where
    H >= 512."""
    one = {(cell_of(r), r["dtype"], r["label"], r["mode"]): r for r in rows if r["threads"] == 1}
    out = []
    for r in rows:
        key = (cell_of(r), r["dtype"], r["label"], r["mode"])
        if r["threads"] != 2 or key not in one:
            continue
        speedup = one[key]["libs"]["rnnfast"]["median_ms"] / r["libs"]["rnnfast"]["median_ms"]
        dtype = cell_prefix(r) + r["dtype"]
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


GATED_FORWARD_PEERS = ("torch", "ort", "openvino", "jax")
GATED_TRAINING_PEERS = ("torch", "jax")


def gated_goal(row) -> tuple:
    """(multiple, roofline share, the tier's name) of issue 23 for a gated row."""
    train = row["mode"] == "train"
    if row["shape"]["H"] <= 256:
        return 1.5, (0.80 if train else 0.85), "H <= 256"
    return 1.25, (0.85 if train else 0.90), "H > 256"


def fastest_peer(row, peers) -> str | None:
    """The peer of `peers` with the shortest time on the row; None if the row has none."""
    present = [p for p in peers if p in row["speedup"]]
    return min(present, key=lambda p: row["libs"][p]["median_ms"]) if present else None


def gated_targets(rows):
    """Issue 23's multiples over the fastest peer, float32 GRU and LSTM rows (module docstring)."""
    out = []
    for r in rows:
        if cell_of(r) == "rnn" or r["dtype"] != "float32":
            continue
        train = r["mode"] == "train"
        peers = GATED_TRAINING_PEERS if train else GATED_FORWARD_PEERS
        peer = fastest_peer(r, peers)
        if peer is None:
            continue
        goal, share, tier = gated_goal(r)
        what = "training" if train else "forward"
        name = (
            f"{cell_of(r)} float32 {tier}: {what} >= {goal:g}x the fastest of "
            f"{', '.join(peers)} (capped at {100 * share:.0f}% of the roofline)"
        )
        out.append(multiple_of_peer(r, peer, goal, name, share=share, cap_above=share))
    return out


GATED_COST = {"gru": 3.0, "lstm": 4.0}  # the FLOP ratio over the Elman cell


def cost_targets(rows):
    """A gated training step at most GATED_COST x the Elman step of the same shape, dtype and
    thread count (rnnfast's times), float32."""
    elman = {
        (r["dtype"], r["threads"], r["label"]): r
        for r in rows
        if cell_of(r) == "rnn" and r["mode"] == "train"
    }
    out = []
    for r in rows:
        key = (r["dtype"], r["threads"], r["label"])
        if cell_of(r) not in GATED_COST or r["mode"] != "train" or r["dtype"] != "float32":
            continue
        if key not in elman:
            continue
        goal = GATED_COST[cell_of(r)]
        ratio = r["libs"]["rnnfast"]["median_ms"] / elman[key]["libs"]["rnnfast"]["median_ms"]
        name = f"{cell_of(r)} float32 training step <= {goal:g}x the Elman step (time ratio)"
        out.append(check(name, r, ratio, goal, ratio <= goal, at_most=True))
    return out


def evaluate_targets(rows: list) -> list:
    """Every target on every row it applies to (grid and extra shapes alike)."""
    return (
        float32_targets(rows)
        + float64_targets(rows)
        + isa_targets(rows)
        + streaming_targets(rows)
        + scaling_targets(rows)
        + gated_targets(rows)
        + cost_targets(rows)
    )
