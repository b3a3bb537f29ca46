// SPDX-License-Identifier: MIT
// sframepp (private): one module's data for the in-process backtrace's
// table, built with the shared builder (sframe/unwind/module_unwind.hpp) from the
// module as it is loaded: its own SFrame copied, or SFrame generated from
// its loaded .eh_frame (its file read only where the module has no
// PT_GNU_EH_FRAME). Not async-signal-safe (allocates; may read a file).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "backtrace_internal.hpp"
#include "sframe/backtrace/backtrace.hpp"

namespace sframe::bt {

/// Whether `m` is the vDSO: an image with no file behind it (the kernel's
/// name for it, linux-vdso or linux-gate).
bool is_vdso(const RawModule& m);

/// Builds one module's data, its executable segments spanning runtime
/// `range`, with the shared builder. A module that has unwind information
/// but ends without SFrame records why in ModuleData::error and failure (the
/// walk then uses the frame-pointer fallback there). `defer`: left to the
/// background generator with no byte of the module read (ModuleData::deferred
/// set). `stack_pcs`: the runtime PCs of the initialising thread's frames in
/// this module, when backtrace_init() defers the rest
/// (BacktraceOptions::stack_libraries_per_fde), else empty.
std::shared_ptr<ModuleData> build_module(const RawModule& m, const AddressRange& range, const BacktraceOptions& opt,
                                         bool defer, std::span<const std::uint64_t> stack_pcs = {});

}  // namespace sframe::bt
