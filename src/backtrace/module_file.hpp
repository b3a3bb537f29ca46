// SPDX-License-Identifier: MIT
// sframepp (private): the CFI sections of a loaded module's file, for the
// in-process backtrace's modules without PT_GNU_EH_FRAME (a static non-PIE
// executable, a library built without unwind tables). ELF64 section headers
// read by hand: the backtrace depends on libc alone (no libelf). Not
// async-signal-safe (opens and reads the file, allocates).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sframe::bt {

/// The link-time range of .eh_frame (loaded, read in place by the caller)
/// and the bytes of .debug_frame (not loaded, read from the file).
struct FileCfi {
  std::uint64_t eh_frame_address = 0;
  std::uint64_t eh_frame_size = 0;
  std::vector<std::byte> debug_frame;
  std::uint64_t debug_frame_address = 0;
  /// Why the file could not be read, or "".
  std::string error;
};

/// Reads the section headers of the ELF64 file at `path` (host byte order,
/// gABI "Sections") and returns what it says of .eh_frame and .debug_frame.
/// Every size is checked against the file's size before anything is
/// allocated; a file that is not readable or not such an ELF file gives
/// `error` set.
FileCfi read_file_cfi(const std::string& path);

}  // namespace sframe::bt
