// Run-time choice of the kernel table: the best ISA this CPU runs, chosen once at load time.
// RNNFAST_ISA=baseline|avx2|avx512 asks for a lower one (a higher or unknown name is noted and
// ignored); set_active_isa lets tests walk every ISA the machine has.
#pragma once

#include <string>
#include <vector>

#include "kernel_table.hpp"

namespace rnnfast {

std::vector<std::string> compiled_isas();   // built into this module (throws where a table
                                            // has an empty entry: see complete())
std::vector<std::string> supported_isas();  // built in and runnable on this CPU, lowest first
std::string active_isa();
std::string isa_note();                        // why RNNFAST_ISA was not honoured, or ""
void set_active_isa(const std::string& name);  // throws std::invalid_argument if not supported

template <class T>
const KernelTable<T>& kernels();

}  // namespace rnnfast
