// SPDX-License-Identifier: MIT
// sframepp: one module's data for the in-process backtrace's table (see
// module_data.hpp).
#include "module_data.hpp"

#include <elf.h>
#include <link.h>

#include <algorithm>
#include <string>
#include <vector>

#include "module_file.hpp"
#include "page_release.hpp"
#include "sframe/unwind/cfi_reader.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/unwind/module_unwind.hpp"

namespace sframe::bt {

namespace {

// The SFrame ABI of this process.
#if defined(__x86_64__)
constexpr Abi kHostAbi = Abi::kAmd64Little;
#elif defined(__aarch64__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
constexpr Abi kHostAbi = Abi::kAarch64Big;
#elif defined(__aarch64__)
constexpr Abi kHostAbi = Abi::kAarch64Little;
#elif defined(__s390x__)
constexpr Abi kHostAbi = Abi::kS390xBig;
#else
#error "no SFrame ABI for this machine"
#endif
constexpr bool kHostBig = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;

// The bytes of a loaded segment, read in place.
std::span<const std::byte> segment(const RawModule& m, const ElfW(Phdr)& p, std::uint64_t size) {
  return {reinterpret_cast<const std::byte*>(m.bias + p.p_vaddr), static_cast<std::size_t>(size)};
}

// The builder's input, read from the loaded image (no file): PT_GNU_SFRAME,
// PT_GNU_EH_FRAME (.eh_frame_hdr) and the readable executable segments.
cfi::ModuleImage image_of(const RawModule& m) {
  cfi::ModuleImage img;
  for (const ElfW(Phdr)& p : m.phdrs) {
    if (p.p_type == elf::kPtGnuSframeSegment && p.p_memsz != 0 && img.sframe.empty()) {
      img.sframe = segment(m, p, p.p_memsz);
      img.sframe_address = p.p_vaddr;
    } else if (p.p_type == PT_GNU_EH_FRAME && p.p_memsz != 0 && img.eh_frame_hdr.empty()) {
      img.eh_frame_hdr = segment(m, p, p.p_memsz);
      img.eh_frame_hdr_address = p.p_vaddr;
    } else if (p.p_type == PT_LOAD && (p.p_flags & PF_X) && (p.p_flags & PF_R) && p.p_filesz != 0) {
      img.code.push_back({p.p_vaddr, segment(m, p, p.p_filesz)});
    }
  }
  return img;
}


// The loaded bytes from link-time `address` to the end of the file-backed
// part of the PT_LOAD segment that holds it (empty: in none).
std::span<const std::byte> loaded_from(const RawModule& m, std::uint64_t address) {
  for (const ElfW(Phdr)& p : m.phdrs) {
    if (p.p_type != PT_LOAD || address < p.p_vaddr || address - p.p_vaddr >= p.p_filesz) continue;
    return {reinterpret_cast<const std::byte*>(m.bias + address),
            static_cast<std::size_t>(p.p_vaddr + p.p_filesz - address)};
  }
  return {};
}

}  // namespace

bool is_vdso(const RawModule& m) { return m.name.rfind("linux-vdso", 0) == 0 || m.name.rfind("linux-gate", 0) == 0; }

std::shared_ptr<ModuleData> build_module(const RawModule& m, const AddressRange& range, const BacktraceOptions& opt,
                                         bool defer, std::span<const std::uint64_t> stack_pcs) {
  auto d = std::make_shared<ModuleData>();
  d->name = m.name;
  d->bias = m.bias;
  d->range = range;
  cfi::ModuleUnwindOptions uo;
  uo.version = opt.generated_version;
  uo.ignore_own = opt.always_generate;
  // The walk looks up through the RowIndex where there is one (rules.cpp):
  // an FdeIndex beside it would be 12 bytes per FDE never read.
  uo.fde_index_with_rows = false;
  // A function the own section lacks (a `main` whose CFI gas gives no SFrame
  // FDE, crt1's _start) is then found in the module's one index, not looked
  // up there and then in the extra map's.
  uo.merge_own = true;
  if (defer) {
    // Left to the background generator with no byte of the module read.
    // Even the .eh_frame_hdr header (does it list any FDE?) would fault its
    // page in, and the kernel maps the cached pages around it with it
    // (fault-around: 64 KiB of RSS per module, mostly .rodata never read);
    // a module with its own SFrame would have its section copied and
    // indexed here. Init then costs only the modules on the stack.
    d->deferred = m;
    return d;
  }
  cfi::ModuleImage image = image_of(m);
  // Code bytes are scanned for trampolines only in modules with their own
  // SFrame (a v2 section has no signal bit); generated ones take theirs
  // from the CIE 'S' augmentation. Scanning every module would read all of
  // its code (80 MB for libLLVM-14).
  if (image.sframe.empty()) image.code.clear();
  d->unwind = cfi::ModuleUnwind::build(image, uo);
  const auto note_trampolines = [&] {
    d->trampolines.clear();
    for (const AddressRange& t : d->unwind.trampolines()) d->trampolines.push_back({t.begin + m.bias, t.end + m.bias});
  };
  note_trampolines();
  const bool native = d->unwind.source() == ModuleSource::kNative;
  if (opt.stack_libraries_per_fde && !stack_pcs.empty() && !m.name.empty() && !native && !image.eh_frame_hdr.empty() && !is_vdso(m) &&
      d->unwind.needs_generation()) {
    // BacktraceOptions::stack_libraries_per_fde: a library on the
    // initialising thread's stack without its own SFrame (libc under main,
    // this library): only the functions of those frames now, each from
    // its FDE (found through .eh_frame_hdr's table, as libgcc finds it, and
    // translated as generate() translates it); the whole module is left to
    // the background generator like the others. Generating all of libc here
    // cost most of init's time and its section, index and .eh_frame pages
    // most of init's RSS. The main program, where backtraces are usually
    // taken, is still generated whole.
    Expected<std::uint64_t> at = cfi::eh_frame_hdr_eh_frame(image.eh_frame_hdr, image.eh_frame_hdr_address);
    std::span<const std::byte> eh = at ? loaded_from(m, *at) : std::span<const std::byte>();
    cfi::OnDemandSource src;
    src.eh_frame_hdr = image.eh_frame_hdr;
    src.eh_frame_hdr_address = image.eh_frame_hdr_address;
    src.eh_frame = {eh, at ? *at : 0, cfi::CfiKind::kEhFrame, kHostBig, 8, 0, 0};
    src.abi = kHostAbi;
    if (!eh.empty() && d->unwind.enable_on_demand(std::move(src))) {
      for (const std::uint64_t pc : stack_pcs) {
        // A return address can be one past its call's function (a call to a
        // noreturn function last in it): the walk looks up pc - 1 there.
        (void)d->unwind.generate_for_pc(pc - m.bias);
        (void)d->unwind.generate_for_pc(pc - 1 - m.bias);
      }
      d->deferred = m;
      return d;
    }
  }
  // SFrame generated from the module's CFI as loaded, for a section at
  // address 0 (start PCs are then link-time addresses): the .eh_frame that
  // .eh_frame_hdr points to, as libgcc and libunwind find it. Only a module
  // without PT_GNU_EH_FRAME has its file read: its section headers, for
  // .eh_frame (then read where it is loaded) and .debug_frame (not loaded):
  // a static non-PIE executable, a library built without unwind tables.
  if (is_vdso(m) && !d->unwind.needs_generation()) return d;
  std::vector<cfi::CfiSource> srcs;
  const auto eh_frame_at = [&](std::uint64_t address, std::uint64_t max) {
    std::span<const std::byte> bytes = loaded_from(m, address);
    if (bytes.size() > max) bytes = bytes.first(static_cast<std::size_t>(max));
    if (!bytes.empty()) srcs.push_back({bytes, address, cfi::CfiKind::kEhFrame, kHostBig, 8, 0, 0});
  };
  FileCfi file;
  if (!image.eh_frame_hdr.empty()) {
    if (!d->unwind.needs_generation()) return d;
    Expected<std::uint64_t> at = cfi::eh_frame_hdr_eh_frame(image.eh_frame_hdr, image.eh_frame_hdr_address);
    if (at) eh_frame_at(*at, ~std::uint64_t{0});
    if (srcs.empty() && !native) {
      d->error = at ? make_error(ElfErrc::kElfError, 0).error : at.error();
      d->failure = at ? ".eh_frame_hdr points outside the loaded segments"
                      : ".eh_frame_hdr unreadable (byte " + std::to_string(at.error().offset) + "), so is .eh_frame";
      return d;
    }
  } else if (!is_vdso(m)) {
    file = read_file_cfi(m.name.empty() ? std::string("/proc/self/exe") : m.name);
    if (file.eh_frame_size != 0) eh_frame_at(file.eh_frame_address, file.eh_frame_size);
    if (!file.debug_frame.empty())
      srcs.push_back({file.debug_frame, file.debug_frame_address, cfi::CfiKind::kDebugFrame, kHostBig, 8, 0, 0});
  }
  if (srcs.empty()) {
    if (!native && !file.error.empty()) {
      d->error = make_error(IoErrc::kIoError, 0).error;
      d->failure = file.error;
    }
    return d;
  }
  Expected<void> gen = d->unwind.generate(srcs, kHostAbi, 0);
  if (!gen && !native) d->error = gen.error();
  // The generated index holds no reference to .eh_frame: its pages go back
  // (page_release.cpp says which may, and why), with those of the
  // .eh_frame_hdr just before it, where ld puts it: libgcc's binary search
  // of its table (the initialising thread's stack, for the modules on it)
  // left them mapped, and only the next libgcc unwind reads them again.
  if (opt.release_cfi_pages && !is_vdso(m)) {
    const auto hdr = reinterpret_cast<std::uint64_t>(image.eh_frame_hdr.data());
    const std::uint64_t hdr_end = hdr + image.eh_frame_hdr.size();
    for (const cfi::CfiSource& s : srcs)
      if (s.kind == cfi::CfiKind::kEhFrame) {
        const auto at = reinterpret_cast<std::uint64_t>(s.bytes.data());
        // At most alignment padding between the two.
        const bool hdr_before = !image.eh_frame_hdr.empty() && hdr_end <= at && at - hdr_end < 16;
        (void)release_pages(m.phdrs, m.bias, hdr_before ? hdr : at, at + s.bytes.size());
      }
  }
  note_trampolines();
  return d;
}

}  // namespace sframe::bt
