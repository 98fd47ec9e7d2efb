// The products a float32 call multiplies with: float32 (the default), or bf16 operands with
// float32 sums (mixed-precision training, issue 40). The choice belongs to the calling thread
// for the span of its calls (the Python fronts' precision="bf16" sets it around them), so a
// float32 call on another thread is never affected. While it is bf16, kernels<float>() returns
// a table whose product entries (pack_b, gemm_block, dot_rows, matvec) round both operands to
// bf16, to nearest even, and sum in float32; every other entry (the gate functions, the cells'
// epilogues, the softmax) is the float table's own, so gates, states and every element-wise
// step stay float32. Passes read the table once, on the calling thread (their constructors),
// so the choice holds for the whole call, on every thread of its team.
#pragma once

#include <string>

#include "kernel_table.hpp"

namespace rnnfast {

enum class Products { float32, bf16 };

// Throws std::runtime_error naming the ISA where bf16 products have no table on this machine.
void set_thread_products(Products p);
Products thread_products();

// Where bf16 products run now: "amx" (TDPBF16PS tiles, where the CPU has AMX; products of
// few rows or a short K on VDPBF16PS), "avx512_bf16" (VDPBF16PS), "emulated" (the test switch
// below), or "" where this machine has none (bf16_unavailable_reason() says why).
std::string bf16_products_path();
std::string bf16_unavailable_reason();

// Test-only: bf16 products by rounding in software on the active float ISA's own kernels
// (operands rounded to bf16, exact products, float32 sums: the same model, on any CPU). Only
// slower than float32, so never chosen on its own.
void set_bf16_emulation(bool on);
bool bf16_emulation();
// Test-only: "" (automatic), "emulated", or a native path this CPU runs ("avx512_bf16" below
// AMX, to test both); std::invalid_argument otherwise.
void set_bf16_path(const std::string& name);

// The table of bf16 products for the active float ISA; throws as set_thread_products.
const KernelTable<float>& bf16_table();

// x rounded to bf16 (to nearest even; a NaN stays NaN), as a float: the scalar model of the
// products' rounding.
float round_to_bf16(float x);

}  // namespace rnnfast
