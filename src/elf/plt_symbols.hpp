// SPDX-License-Identifier: MIT
// sframepp: the PLT entries perf names as function symbols ("NAME@plt"),
// synthesized from an x86-64 file's PLT relocations as perf 6.1 and perf
// 7.2 each do (util/symbol-elf.c, dso__synthesize_plt_symbols). The symbol
// reader (symbols.cpp) adds them to a NamingPolicy::kPerf table.
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "sframe/elf/symbols.hpp"

namespace sframe::elf::detail {

/// The section named `name`, or null.
Elf_Scn* find_named(Elf* e, const char* name);

/// perf 6.1's PLT symbols (PerfPlt::k6_1) appended to `out`, numbered from
/// `order` on (advanced past them). Nothing for a file that is not x86-64
/// or has no PLT relocations.
void add_plt_symbols(Elf* e, std::vector<FunctionSymbol>& out, std::uint32_t& order);

/// perf 7.2's PLT symbols (PerfPlt::k7_2), .plt.got's included, appended
/// as add_plt_symbols() does. A slot whose R_X86_64_IRELATIVE entry has no
/// symbol gets an offset name here and goes to `ifuncs` as (slot address,
/// addend), for the reader to name after the IFUNC once its table is
/// sorted.
void add_plt_symbols_7_2(Elf* e, std::vector<FunctionSymbol>& out, std::uint32_t& order,
                         std::vector<std::pair<std::uint64_t, std::uint64_t>>& ifuncs);

}  // namespace sframe::elf::detail
