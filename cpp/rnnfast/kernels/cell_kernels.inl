// The gated cells' fused step kernels (KernelTable::lstm_row, gru_row), included by
// simd_kernels.inl inside its ISA namespace, after the gate functions.
//
// Why fused: a cell's step on a block of units had been one pass per gate function over the
// block (activate) plus plain loops around them for the sums, the state update and the stored
// gates, on blocks of one panel (16 units on AVX2): LSTM 100x16x64x128, float32, AVX2, 1 thread,
// spent 30% of its forward there (perf: activate 17%, the loops 5%), against 52% in the GEMM.
// Here each vector of units is loaded once, its gates' functions run side by side (independent
// chains for the out-of-order core to overlap) and every output is stored once.

// A gate function's derivative from its output y (cells/gate_layout.hpp's pointwise_grad).
template <class T>
RNNFAST_ALWAYS_INLINE typename Simd<T>::vec pointwise_grad_of(Pointwise op,
                                                              typename Simd<T>::vec y) {
    using V = typename Simd<T>::vec;
    const V zero = {};
    const V one = splat<V>(static_cast<T>(1));
    switch (op) {
        case Pointwise::sigmoid:
            return y * (one - y);
        case Pointwise::hard_sigmoid:
            return (y > zero) & (y < one) ? splat<V>(static_cast<T>(1.0 / 6.0)) : zero;
        case Pointwise::tanh:
            return one - y * y;
        case Pointwise::relu:
            return y > zero ? one : zero;
    }
    return zero;
}

// The gate functions: compile-time for the pair every default layer runs (tanh, sigmoid), so
// the loop has no branch per vector; any other pair through one switch per value.
template <class T, Pointwise kAct, Pointwise kRec>
struct FixedGates {
    using V = typename Simd<T>::vec;
    RNNFAST_ALWAYS_INLINE V act(V x) const { return apply_pointwise<T>(kAct, x); }
    RNNFAST_ALWAYS_INLINE V rec(V x) const { return apply_pointwise<T>(kRec, x); }
    RNNFAST_ALWAYS_INLINE V act_grad(V y) const { return pointwise_grad_of<T>(kAct, y); }
    RNNFAST_ALWAYS_INLINE V rec_grad(V y) const { return pointwise_grad_of<T>(kRec, y); }
};
template <class T>
struct RuntimeGates {
    using V = typename Simd<T>::vec;
    Pointwise act_op, rec_op;
    RNNFAST_ALWAYS_INLINE V act(V x) const { return apply_pointwise<T>(act_op, x); }
    RNNFAST_ALWAYS_INLINE V rec(V x) const { return apply_pointwise<T>(rec_op, x); }
    RNNFAST_ALWAYS_INLINE V act_grad(V y) const { return pointwise_grad_of<T>(act_op, y); }
    RNNFAST_ALWAYS_INLINE V rec_grad(V y) const { return pointwise_grad_of<T>(rec_op, y); }
};

// n lanes at p (n <= W; the rest of the vector zero), and back.
template <class T, bool kFull>
RNNFAST_ALWAYS_INLINE typename Simd<T>::vec load_lanes(const T* p, index n) {
    using V = typename Simd<T>::vec;
    if (kFull) return load<V>(p);
    T lanes[Simd<T>::W] = {};
    std::memcpy(lanes, p, sizeof(T) * static_cast<size_t>(n));
    return load<V>(lanes);
}
template <class T, bool kFull>
RNNFAST_ALWAYS_INLINE void store_lanes(T* p, typename Simd<T>::vec v, index n) {
    if (kFull) return store(p, v);
    T lanes[Simd<T>::W];
    store(lanes, v);
    std::memcpy(p, lanes, sizeof(T) * static_cast<size_t>(n));
}

// units(full, k, n) over a block of w units: on each whole vector (full: std::true_type, n = W),
// then on the partial last one (std::false_type, n < W), through lane copies.
template <class T, class Units>
RNNFAST_ALWAYS_INLINE void over_units(index w, Units&& units) {
    constexpr int W = Simd<T>::W;
    index k = 0;
    for (; k + W <= w; k += W)
        units(std::true_type{}, k, index(W));
    if (k < w) units(std::false_type{}, k, w - k);
}

// run(gates) with a row's gate functions: FixedGates for the default pair, else RuntimeGates.
template <class T, class Run>
RNNFAST_ALWAYS_INLINE void with_gates(Pointwise act, Pointwise rec, Run&& run) {
    if (act == Pointwise::tanh && rec == Pointwise::sigmoid)
        run(FixedGates<T, Pointwise::tanh, Pointwise::sigmoid>{});
    else
        run(RuntimeGates<T>{act, rec});
}

// Units [k, k + n) of an LSTM row (n = W where kFull).
template <class T, bool kFull, class Gates>
RNNFAST_ALWAYS_INLINE void lstm_units(const GateRow<T>& r, const Gates& gates, index k, index n) {
    using V = typename Simd<T>::vec;
    const index w = r.w;
    const auto in = [&](int g) {
        return load_lanes<T, kFull>(r.a + g * w + k, n) + load_lanes<T, kFull>(r.hh + g * w + k, n);
    };
    const V i = gates.rec(in(0)), f = gates.rec(in(1)), g = gates.act(in(2)), o = gates.rec(in(3));
    const V c = f * load_lanes<T, kFull>(r.prev + k, n) + i * g;
    store_lanes<T, kFull>(r.next + k, c, n);
    store_lanes<T, kFull>(r.m + k, o * gates.act(c), n);
    if (r.store) {
        const V stored[5] = {i, f, g, o, c};
        for (int s = 0; s < 5; ++s)
            store_lanes<T, kFull>(r.store + s * r.H + k, stored[s], n);
    }
}

// Units [k, k + n) of a GRU row, reset_after: n = act(a_n + r * hh_n).
template <class T, bool kFull, class Gates>
RNNFAST_ALWAYS_INLINE void gru_units(const GateRow<T>& r, const Gates& gates, index k, index n) {
    using V = typename Simd<T>::vec;
    const index w = r.w;
    const auto at = [&](const T* p, int g) { return load_lanes<T, kFull>(p + g * w + k, n); };
    const V rg = gates.rec(at(r.a, 0) + at(r.hh, 0));
    const V z = gates.rec(at(r.a, 1) + at(r.hh, 1));
    const V hn = at(r.hh, 2);
    const V ng = gates.act(at(r.a, 2) + rg * hn);
    const V h_prev = load_lanes<T, kFull>(r.prev + k, n);
    store_lanes<T, kFull>(r.next + k, (static_cast<T>(1) - z) * ng + z * h_prev, n);
    if (r.store) {
        const V stored[4] = {rg, z, ng, hn};
        for (int s = 0; s < 4; ++s)
            store_lanes<T, kFull>(r.store + s * r.H + k, stored[s], n);
    }
}

template <class T>
void lstm_row(const GateRow<T>& r) {
    with_gates<T>(r.act, r.rec, [&](const auto& gates) {
        over_units<T>(r.w, [&](auto full, index k, index n) {
            lstm_units<T, decltype(full)::value>(r, gates, k, n);
        });
    });
}
template <class T>
void gru_row(const GateRow<T>& r) {
    with_gates<T>(r.act, r.rec, [&](const auto& gates) {
        over_units<T>(r.w, [&](auto full, index k, index n) {
            gru_units<T, decltype(full)::value>(r, gates, k, n);
        });
    });
}

// ---- the backward ----------------------------------------------------------------------------

// Units [k, k + n) of an LSTM row's backward: from dm and dc_t, the four gates' gradients, the
// carry dc_{t-1} = dc_t' * f and (projected LSTMs) m_t.
template <class T, bool kFull, class Gates>
RNNFAST_ALWAYS_INLINE void lstm_grad_units(const GateGradRow<T>& r, const Gates& gates, index k,
                                           index n) {
    using V = typename Simd<T>::vec;
    const auto at = [&](const T* p) { return load_lanes<T, kFull>(p + k, n); };
    const V i = at(r.store), f = at(r.store + r.H), g = at(r.store + 2 * r.H);
    const V o = at(r.store + 3 * r.H);
    const V tc = gates.act(at(r.store + 4 * r.H));
    const V dm = at(r.g);
    const V dct = at(r.carry) + dm * o * gates.act_grad(tc);
    store_lanes<T, kFull>(r.dA + k, dct * g * gates.rec_grad(i), n);
    store_lanes<T, kFull>(r.dA + r.H + k, dct * at(r.prev) * gates.rec_grad(f), n);
    store_lanes<T, kFull>(r.dA + 2 * r.H + k, dct * i * gates.act_grad(g), n);
    store_lanes<T, kFull>(r.dA + 3 * r.H + k, dm * tc * gates.rec_grad(o), n);
    store_lanes<T, kFull>(r.carry + k, dct * f, n);
    if (r.extra) store_lanes<T, kFull>(r.extra + k, o * tc, n);
}

// Units [k, k + n) of a GRU row's backward: da_z, da_n, the carry g * z and, reset_after,
// da_r and da_n * r.
template <class T, bool kFull, class Gates>
RNNFAST_ALWAYS_INLINE void gru_grad_units(const GateGradRow<T>& r, const Gates& gates, index k,
                                          index n) {
    using V = typename Simd<T>::vec;
    const auto at = [&](const T* p) { return load_lanes<T, kFull>(p + k, n); };
    const V rg = at(r.store), z = at(r.store + r.H), ng = at(r.store + 2 * r.H);
    const V g = at(r.g);
    const V dn = g * (static_cast<T>(1) - z);
    const V dz = g * (at(r.prev) - ng);
    const V dan = dn * gates.act_grad(ng);
    store_lanes<T, kFull>(r.dA + r.H + k, dz * gates.rec_grad(z), n);
    store_lanes<T, kFull>(r.dA + 2 * r.H + k, dan, n);
    store_lanes<T, kFull>(r.carry + k, g * z, n);
    if (r.extra) {  // reset_after
        store_lanes<T, kFull>(r.dA + k, dan * at(r.store + 3 * r.H) * gates.rec_grad(rg), n);
        store_lanes<T, kFull>(r.extra + k, dan * rg, n);
    }
}

template <class T>
void lstm_grad_row(const GateGradRow<T>& r) {
    with_gates<T>(r.act, r.rec, [&](const auto& gates) {
        over_units<T>(r.w, [&](auto full, index k, index n) {
            lstm_grad_units<T, decltype(full)::value>(r, gates, k, n);
        });
    });
}
template <class T>
void gru_grad_row(const GateGradRow<T>& r) {
    with_gates<T>(r.act, r.rec, [&](const auto& gates) {
        over_units<T>(r.w, [&](auto full, index k, index n) {
            gru_grad_units<T, decltype(full)::value>(r, gates, k, n);
        });
    });
}
