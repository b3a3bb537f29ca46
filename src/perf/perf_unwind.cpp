// SPDX-License-Identifier: MIT
// Replaying a perf.data recording: processes, modules, and each sample's
// kernel and user frames (see perf_unwind.hpp).
#include "perf_unwind.hpp"

#include "address_space.hpp"
#include "kernel_symbols.hpp"
#include "repeat_cache.hpp"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <unordered_map>

#include "sframe/cfi/cfi.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/unwind/module_table.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "sframe/process/process.hpp"
#include "sframe/elf/symbols.hpp"
#include "sframe/process/walk_chain.hpp"

namespace sframe::perf {

std::string default_buildid_dir() {
  const char* h = std::getenv("HOME");
  return std::string(h && *h ? h : "/root") + "/.debug";
}

std::string kallsyms_cache_path(const std::string& buildid_dir, std::string_view build_id) {
  return buildid_dir + "/" + std::string(kKernelDso) + "/" + std::string(build_id) + "/kallsyms";
}

std::string kallsyms_index_path(const std::string& buildid_dir, std::string_view build_id) {
  return kallsyms_cache_path(buildid_dir, build_id) + ".sframe-index";
}

std::string_view to_string(FrameOrigin o) noexcept {
  switch (o) {
    case FrameOrigin::kKernel: return "kernel";
    case FrameOrigin::kRegisters: return "registers";
    case FrameOrigin::kSFrame: return "sframe";
    case FrameOrigin::kGenerated: return "generated";
    case FrameOrigin::kFramePointer: return "frame-pointer";
    case FrameOrigin::kSignalFrame: return "signal-frame";
    case FrameOrigin::kCallchain: return "callchain";
  }
  return "?";
}

namespace detail {

// One file as mapped by the recorded processes (one per path + build-id).
struct Dso {
  std::string name;
  std::string build_id;
  // The opened file's own build-id when none was recorded (the frames'
  // ResolvedFrame::build_id).
  std::string file_build_id;
  std::shared_ptr<const elf::ElfFile> file;
  struct Load {
    std::uint64_t vaddr, offset, filesz;
  };
  std::vector<Load> loads;
  std::unique_ptr<cfi::ModuleUnwind> unwind;
  bool unwind_built = false;
  std::unique_ptr<elf::SymbolTable> symbols;
  std::unordered_map<const elf::FunctionSymbol*, std::string> names;
  // Link-time PC -> its name (in `names`) and offset; null name: none.
  struct PcName {
    const std::string* name = nullptr;
    std::uint64_t offset = 0;
  };
  std::unordered_map<std::uint64_t, PcName> pcs;
  std::vector<AddressRange> trampolines;  // link-time

  // runtime - link-time for a mapping of this file at `start` from file
  // offset `pgoff` (the PT_LOAD holding that offset).
  std::uint64_t bias(std::uint64_t start, std::uint64_t pgoff) const {
    for (const Load& l : loads) {
      const std::uint64_t page_lo = l.offset & ~std::uint64_t{4095};
      if (pgoff >= page_lo && pgoff < l.offset + std::max<std::uint64_t>(l.filesz, 1))
        return start - pgoff - (l.vaddr - l.offset);
    }
    return start - pgoff;
  }
};

}  // namespace detail

namespace {

using detail::Dso;
using detail::MapEntry;
using detail::Space;

SessionOptions with_defaults(SessionOptions o) {
  if (o.buildid_dir.empty()) o.buildid_dir = default_buildid_dir();
  return o;
}

// The recorded kernel's build-ids (BUILD_ID feature entries), in file order.
std::vector<std::string> kernel_build_ids(const FileInfo& info) {
  std::vector<std::string> out;
  for (const BuildIdEntry& b : info.build_ids)
    if (b.filename == kKernelDso && !b.build_id.empty()) out.push_back(b.build_id);
  return out;
}

}  // namespace

struct Session::Impl {
  SessionOptions opt;
  FileInfo info;
  std::unordered_map<std::string, std::string> build_id_of;  // path -> hex (BUILD_ID feature)
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Dso>> dsos;
  std::unordered_map<std::uint32_t, std::unique_ptr<Space>> spaces;  // by pid
  std::unordered_map<std::uint32_t, std::string> comms;              // by tid
  std::uint64_t epoch = 1;  // bumped when a module's unwind information grows
  SessionStats stats;
  // Why walks ended: why() returns string literals, so views are stable
  // (no allocation per sample).
  std::map<std::string_view, std::uint64_t> stops;
  UnwoundSample out;
  std::vector<Frame> frames;
  std::vector<process::RuleSource> sources;
  // The kernel frames' names (kallsyms read at the first one).
  detail::KernelSymbols ksyms;
  const std::string kernel_dso{kKernelDso};
  std::string why_buf;
  std::string comm_buf;
  // Samples without a stack copy resolved since the last state change
  // (process()); a process between its exec and its first sample of the
  // new image (Space::before_exec) is not remembered.
  detail::RepeatCache repeats;
  std::vector<std::uint32_t> ids;  // unwind()'s frames' indexes in `repeats`

  Impl(const FileInfo& fi, const SessionOptions& o)
      : opt(with_defaults(o)), info(fi), ksyms(opt.kallsyms, opt.buildid_dir, kernel_build_ids(fi)) {
    if (!opt.files) opt.files = std::make_shared<FileTable>();
    for (const BuildIdEntry& b : info.build_ids) build_id_of.emplace(b.filename, b.build_id);
    frames.resize(std::max<std::size_t>(opt.max_stack, 1));
    sources.resize(frames.size());
  }

  // --- files -------------------------------------------------------------

  Dso* dso_for(std::string_view path, std::string build_id) {
    std::string p(path);
    if (build_id.empty()) {
      auto it = build_id_of.find(p);
      if (it != build_id_of.end()) build_id = it->second;
    }
    auto key = std::make_pair(p, build_id);
    auto it = dsos.find(key);
    if (it != dsos.end()) return it->second.get();
    auto d = std::make_unique<Dso>();
    d->name = p;
    d->build_id = build_id;
    open_file(*d);
    Dso* raw = d.get();
    dsos.emplace(std::move(key), std::move(d));
    return raw;
  }

  void open_file(Dso& d) {
    std::vector<std::string> tries;
    if (!d.name.empty() && d.name.front() == '/') tries.push_back(d.name);
    // perf record keeps a copy of each file by build-id; the vdso's (no
    // file of its own) under the name "vdso", as perf reads it back.
    if (d.build_id.size() > 2)
      tries.push_back(opt.buildid_dir + "/.build-id/" + d.build_id.substr(0, 2) + "/" + d.build_id.substr(2) +
                      (d.name == "[vdso]" ? "/vdso" : "/elf"));
    for (const std::string& t : tries) {
      const FileTable::Entry& f = opt.files->open(t, d.build_id);
      // A file whose build-id differs from the recorded one was replaced
      // since: try the cache.
      if (!f.file || (!d.build_id.empty() && f.build_id != d.build_id)) continue;
      d.file = f.file;
      if (d.build_id.empty()) d.file_build_id = f.build_id;
      break;
    }
    // No copy of the vDSO: this kernel's, as perf script takes its own
    // (its build-id note is in ".note", which perf does not read: none).
    if (!d.file && d.name == "[vdso]") d.file = opt.files->vdso().file;
    if (!d.file) return;
    ++stats.dsos;
    Elf* e = static_cast<Elf*>(d.file->native_handle());
    std::size_t phnum = 0;
    if (elf_getphdrnum(e, &phnum) == 0) {
      for (std::size_t i = 0; i < phnum; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
          d.loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
      }
    }
  }

  // The unwind information of `d`, built on first use (generation waits
  // for a PC that needs it).
  const cfi::ModuleUnwind* unwind_of(Dso& d) {
    if (!d.file) return nullptr;
    if (!d.unwind_built) {
      d.unwind_built = true;
      auto own = d.file->sframe_section();
      cfi::ModuleImage img = process::module_image(*d.file, own);
      // Without an own section, signal trampolines come from the CFI ('S'
      // FDEs: the generated FDE's signal bit, SFrame v3 §2.4.1): the code
      // of every mapped file is not scanned (a few ms for a Python run's
      // dozens of files).
      if (!own) img.code.clear();
      cfi::ModuleUnwindOptions mo;
      mo.per_fde_rows = true;  // walks look generated FDEs up through the Module only
      d.unwind = std::make_unique<cfi::ModuleUnwind>(cfi::ModuleUnwind::build(img, mo));
      // SFrame for what the own section lacks, one FDE at a time as walks
      // need it (whole-module generation where .eh_frame_hdr cannot lead).
      if (d.unwind->needs_generation()) (void)cfi::enable_on_demand(*d.unwind, *d.file);
      // By code (x86-64 rt_sigreturn sequences, glibc's __restore_rt) and by
      // CFI ('S' FDEs, once generated): not by symbol, so that a file's
      // symbols are read only when one of its frames is printed.
      d.trampolines.assign(d.unwind->trampolines().begin(), d.unwind->trampolines().end());
    }
    return d.unwind.get();
  }

  const elf::SymbolTable& symbols_of(Dso& d) {
    if (!d.symbols) {
      d.symbols = std::make_unique<elf::SymbolTable>();
      if (d.file) {
        elf::SymbolOptions so;
        so.policy = elf::NamingPolicy::kPerf;
        so.perf_plt = opt.names == PerfVersion::k6_1 ? elf::PerfPlt::k6_1 : elf::PerfPlt::k7_2;
        *d.symbols = elf::SymbolTable::read(*d.file, so);
      }
    }
    return *d.symbols;
  }

  // --- address spaces -------------------------------------------------------

  Space& space(std::uint32_t pid) {
    auto& s = spaces[pid];
    if (!s) s = std::make_unique<Space>();
    return *s;
  }

  // The unwinder's entries of mapping `m` (its file's own or generated
  // section, the FDEs generated so far) appended to `e`, its signal
  // trampolines to `tramps`.
  void modules_of(const MapEntry& m, ModuleTable::Entries& e, std::vector<AddressRange>& tramps) {
    if (!m.dso) return;
    const cfi::ModuleUnwind* u = unwind_of(*m.dso);
    if (!u) return;
    e.add(*u, {m.start, m.end}, m.bias);
    for (const AddressRange& t : m.dso->trampolines)
      if (t.begin + m.bias >= m.start && t.begin + m.bias < m.end) tramps.push_back({t.begin + m.bias, t.end + m.bias});
  }

  // Brings the unwinder's maps up to date: by adding the modules of the
  // mappings added since the last build when that is all that changed
  // (extend()), else by a full rebuild.
  void update(Space& s) {
    if (s.built && !s.cut_since_build && s.built_epoch == epoch && extend(s)) return;
    rebuild(s);
  }

  // Adds the modules of s.added to the built maps, each a new generation
  // the rule cache adopts (dropping only its entries in the new range, as
  // View::generate_for does per FDE). False, with the maps unchanged or
  // partly extended, when a rebuild must follow: no room left, or a module
  // that overlaps one present (a full rebuild orders such conflicts by
  // address).
  bool extend(Space& s) {
    ModuleTable::Entries e;
    std::vector<AddressRange> tramps;
    for (const MapEntry& a : s.added) {
      auto it = s.maps.find(a.start);
      // Added, then replaced by a later mapping at the same start (no cut:
      // the same range) or gone: the map as it stands is what counts.
      if (it == s.maps.end()) continue;
      modules_of(it->second, e, tramps);
    }
    if (!s.table.extend(e, s.cache.get())) return false;
    s.trampolines.insert(s.trampolines.end(), tramps.begin(), tramps.end());
    s.added.clear();
    s.dirty = false;
    return true;
  }

  void rebuild(Space& s) {
    ModuleTable::Entries e;
    s.trampolines.clear();
    for (const auto& [start, m] : s.maps) modules_of(m, e, s.trampolines);
    // With room for the FDEs generated from now on (View::generate_for).
    s.table.assign(e);
    s.built = true;
    s.dirty = false;
    s.built_epoch = epoch;
    s.added.clear();
    s.cut_since_build = false;
  }

  // walk_chain()'s view of one process.
  struct View {
    Impl& im;
    Space& s;
    const ModuleMap& unwind_map() const { return s.table.primary(); }
    const ModuleMap& extra_map() const { return s.table.extra(); }
    bool generated(std::uint64_t lpc) const {
      const MapEntry* m = s.find(lpc);
      return m && m->dso && m->dso->unwind && m->dso->unwind->source() == ModuleSource::kGenerated;
    }
    bool generate_for(std::uint64_t lpc) {
      const MapEntry* m = s.find(lpc);
      if (!m || !m->dso || !m->dso->unwind) return false;
      Dso& d = *m->dso;
      if (d.unwind->on_demand()) {
        // The FDE covering lpc alone; its entry joins this process's maps
        // (others mapping the file pick it up when they need it, or at
        // their next rebuild).
        const std::size_t before = d.unwind->generated_fdes().size();
        const ModuleTable::Generated g =
            s.table.generate_for_pc(*d.unwind, {m->start, m->end}, m->bias, lpc, s.cache.get());
        const std::size_t after = d.unwind->generated_fdes().size();
        im.stats.generated_fdes += after - before;
        im.stats.generated_dsos += before == 0 && after > 0;
        return g == ModuleTable::Generated::kAdded;
      }
      if (!d.unwind->needs_generation()) return false;
      auto eh = d.file->section_bytes(".eh_frame");
      (void)cfi::generate(*d.unwind, *d.file, eh ? eh->header.address : 0);
      ++im.stats.generated_dsos;
      ++im.epoch;
      im.rebuild(s);
      return d.unwind->extra().usable() || d.unwind->source() == ModuleSource::kGenerated;
    }
    bool executable(std::uint64_t addr) const { return s.find(addr) != nullptr; }
    std::span<const AddressRange> signal_trampolines() const { return s.trampolines; }
  };

  // --- records --------------------------------------------------------------

  void process(const Record& r) {
    if (r.type == kRecordMmap || r.type == kRecordMmap2 || r.type == kRecordComm || r.type == kRecordExit ||
        r.type == kRecordFork)
      repeats.clear();
    switch (r.type) {
      case kRecordMmap:
      case kRecordMmap2: {
        const Mmap& m = r.mmap;
        if (m.pid == static_cast<std::uint32_t>(-1)) {  // kernel maps: kallsyms instead
          if (m.filename == kKernelTextMmap) ksyms.set_recorded_text(m.pgoff);
          return;
        }
        if (m.len == 0 || m.start + m.len < m.start) return;
        MapEntry e;
        e.start = m.start;
        e.end = m.start + m.len;
        e.pgoff = m.pgoff;
        const bool named = !m.filename.empty() && (m.filename.front() == '/' || m.filename == "[vdso]");
        if (m.exec && named && m.filename != "[vdso]") {
          e.dso = dso_for(m.filename, lowercase_hex(m.build_id));
          e.bias = e.dso->bias(e.start, e.pgoff);
        } else if (m.exec && m.filename == "[vdso]") {
          e.dso = dso_for("[vdso]", "");
          e.bias = e.start - e.pgoff;
        }
        space(m.pid).insert(e, m.exec);
        return;
      }
      case kRecordComm:
        // An exec keeps the old mappings until new ones replace them, as
        // perf's map state does: a sample taken inside execve, after the
        // new image's MMAP records, still holds the old image's user PC.
        // Until the new image runs (Space::settle_exec()).
        comms[r.comm.tid] = std::string(r.comm.comm);
        if (r.comm.exec && r.comm.pid == r.comm.tid) space(r.comm.pid).mark_exec();
        return;
      case kRecordExit:
        // perf 7.2 forgets an exited thread: a later sample of its tid
        // (taken in the kernel's exit path after the EXIT record, which
        // system-wide recordings hold) belongs to a new thread, unnamed,
        // and without mappings when the process's leader exited.
        if (opt.forget_exited) {
          comms.erase(r.task.tid);
          if (r.task.tid == r.task.pid) {
            Space& s = space(r.task.pid);
            s.maps.clear();
            s.reset_maps();
          }
        }
        return;
      case kRecordFork: {
        const Task& t = r.task;
        auto c = comms.find(t.ptid);
        if (c != comms.end()) comms[t.tid] = c->second;
        if (t.pid != t.ppid) {
          // A new process: a copy of its parent's mappings.
          auto p = spaces.find(t.ppid);
          Space& s = space(t.pid);
          s.maps = p != spaces.end() ? p->second->maps : std::map<std::uint64_t, MapEntry>{};
          s.before_exec = p != spaces.end() && p->second->before_exec;
          s.reset_maps();
        }
        return;
      }
      default:
        return;
    }
  }

  std::string_view comm(std::uint32_t tid) {
    auto it = comms.find(tid);
    if (it != comms.end()) return it->second;
    // perf names the idle task when it sets up the kernel's maps
    // (machine__create_kernel_maps), with no COMM record.
    if (tid == 0) return "swapper";
    comm_buf = ":" + std::to_string(tid);
    return comm_buf;
  }

  // --- kernel frames ----------------------------------------------------------

  void kernel_frame(std::uint64_t addr) {
    ResolvedFrame f;
    f.address = f.ip = f.runtime_ip = addr;
    f.origin = FrameOrigin::kKernel;
    f.dso = &kernel_dso;
    if (!opt.symbols) {
      out.frames.push_back(f);
      return;
    }
    const detail::KernelSymbols::Function kf = ksyms.find(addr);
    if (kf.name) {
      f.symbol = kf.name;
      f.symoff = addr - kf.start;
    }
    out.frames.push_back(f);
  }

  // --- user frames ------------------------------------------------------------

  // The name perf prints for `sym` of `d` (SessionOptions::names).
  std::string name_of(const elf::SymbolTable& t, const elf::FunctionSymbol& sym) {
    if (opt.names == PerfVersion::k6_1) return t.display_name(sym);
    // perf 7.2 demangles the part before any @VERSION whole (return type,
    // parameters, "[clone .isra.0]").
    const auto at = sym.name.find('@');
    const bool versioned = at != std::string::npos && at > 0;
    std::string n = elf::demangle(versioned ? std::string_view(sym.name).substr(0, at) : std::string_view(sym.name));
    if (versioned) n += std::string_view(sym.name).substr(at);
    return n;
  }

  void user_frame(Space& s, std::uint64_t pc, bool caller, FrameOrigin origin) {
    ResolvedFrame f;
    f.address = pc;
    f.origin = origin;
    const std::uint64_t at = caller ? pc - 1 : pc;
    f.ip = f.runtime_ip = at;
    if (const MapEntry* m = s.find(at); m && m->dso) {
      Dso& d = *m->dso;
      f.dso = &d.name;
      f.map_start = m->start;
      f.map_end = m->end;
      f.map_pgoff = m->pgoff;
      if (!d.build_id.empty())
        f.build_id = &d.build_id;
      else if (!d.file_build_id.empty())
        f.build_id = &d.file_build_id;
      // perf 6.1 prints the map-relative address for every file, an
      // ET_EXEC one included (python3.11: 0x22dc2a for 0x62dc2a).
      f.ip = at - m->start + m->pgoff;
      if (!opt.symbols) {
        out.frames.push_back(f);
        return;
      }
      // Per link-time address: a profile repeats a few thousand PCs, and a
      // hash lookup costs a fraction of the symbol table's search.
      auto [c, fresh] = d.pcs.try_emplace(at - m->bias);
      if (fresh) {
        const elf::SymbolTable& t = symbols_of(d);
        if (auto hit = t.find(at - m->bias)) {
          auto [it, added] = d.names.try_emplace(hit->symbol);
          if (added) it->second = name_of(t, *hit->symbol);
          c->second = {&it->second, hit->offset};
        }
      }
      if (c->second.name) {
        f.symbol = c->second.name;
        f.symoff = c->second.offset;
      }
    }
    out.frames.push_back(f);
  }

  static FrameOrigin origin_of(process::RuleSource r) {
    switch (r) {
      case process::RuleSource::kGenerated: return FrameOrigin::kGenerated;
      case process::RuleSource::kFramePointer: return FrameOrigin::kFramePointer;
      case process::RuleSource::kSignalFrame: return FrameOrigin::kSignalFrame;
      default: return FrameOrigin::kSFrame;
    }
  }

  const UnwoundSample& unwind(const Record& r) {
    out.frames.clear();
    out.walked = false;
    out.stop = StopReason::kOutermost;
    out.why = {};
    out.stop_address = out.stack_base = out.stack_size = 0;
    out.repeat_id = 0;
    out.frame_ids = {};
    const Sample& smp = r.sample;
    ++stats.samples;
    // The sampled registers, in one pass over the mask.
    std::array<std::uint64_t, kX86R15 + 1> reg{};
    const std::uint64_t has = smp.user_regs(reg);
    // Without registers, the recorded callchain alone names the frames: a
    // repeat of an earlier sample's takes its frames.
    const std::uint64_t key = has ? 0 : detail::RepeatCache::key(r.id.pid, smp);
    if (key != 0) {
      repeats.make_room(smp.callchain_nr);
      if (const detail::RepeatCache::Hit hit = repeats.find(key, r.id.pid, smp); hit.id != 0) {
        repeats.copy_frames(hit.frames, out.frames);
        out.repeat_id = hit.id;
        out.frame_ids = hit.frames;
        out.frame_generation = repeats.generation();
        count(out);
        return out;
      }
    }
    // Each callchain word's frame, kept by the repeat cache (its index in
    // `ids`) while no process changes: the words of a profile's stacks
    // repeat far more often than whole stacks do.
    // `resolve` pushes the frame of a word not kept yet.
    ids.clear();
    const auto by_word = [&](std::uint32_t space, std::uint64_t v, bool caller, auto&& resolve) {
      std::uint32_t id = repeats.word_frame(space, v, caller);
      if (id == detail::RepeatCache::kNone) {
        resolve();
        id = repeats.keep_word_frame(space, v, caller, out.frames.back());
      } else {
        out.frames.push_back(repeats.frame(id));
      }
      ids.push_back(id);
    };
    // Kernel part of the callchain (perf: entries after PERF_CONTEXT_KERNEL).
    bool in_kernel = false;
    std::uint64_t user_at = smp.callchain_nr;  // the first user entry
    for (std::uint64_t i = 0; i < smp.callchain_nr && out.frames.size() < opt.max_stack; ++i) {
      const std::uint64_t v = smp.callchain(i);
      if (v >= kContextMax) {
        in_kernel = v == kContextKernel;
        if (v == kContextUser && user_at == smp.callchain_nr) user_at = i + 1;
        continue;
      }
      if (!in_kernel) continue;
      if (key != 0)
        by_word(detail::RepeatCache::kKernelSpace, v, false, [&] { kernel_frame(v); });
      else
        kernel_frame(v);
    }
    const auto have = [has](unsigned i) { return ((has >> i) & 1) != 0; };
    bool settled = true;  // not between an exec and the new image's first sample
    if (!has && user_at < smp.callchain_nr) {
      // No stack copy: the recorded user frames, already at return
      // address - 1 for callers. Named through the mappings alone: the
      // unwinder's maps (every mapped file's unwind tables) are built only
      // for a walk, which a recording without stack copies (`sframe
      // record`'s) never needs.
      Space& s = space(r.id.pid);
      s.settle_exec(smp.callchain(user_at));
      settled = !s.before_exec;
      for (std::uint64_t i = user_at; i < smp.callchain_nr && out.frames.size() < opt.max_stack; ++i) {
        const std::uint64_t v = smp.callchain(i);
        if (v >= kContextMax) break;
        const auto resolve = [&] {
          user_frame(s, v, false, FrameOrigin::kCallchain);
          if (i > user_at) out.frames.back().address = v + 1;
        };
        if (key != 0 && settled)
          by_word(r.id.pid, v, i > user_at, resolve);
        else
          resolve();
      }
    } else if (have(kX86Ip) && have(kX86Sp) && have(kX86Bp) && out.frames.size() < opt.max_stack) {
      const std::uint64_t sp = reg[kX86Sp];
      out.walked = true;
      Space& s = space(r.id.pid);
      s.settle_exec(reg[kX86Ip]);
      if (s.dirty || s.built_epoch != epoch) update(s);
      if (smp.stack.empty()) {
        // Nothing copied (dyn_size 0): a sample inside an exec, after the
        // switch to the new image's memory, whose stack the old SP does not
        // reach. Both perfs then print no user frame: their dwarf unwinding
        // bails out when no stack was captured.
        out.stop = StopReason::kUnreadableMemory;
        out.why = "no stack copied";
        out.stop_address = reg[kX86Ip];
        out.stack_base = sp;
      } else {
        walk_user(s, smp, reg, has);
      }
    }
    if (key != 0 && settled && ids.size() == out.frames.size()) {
      out.repeat_id = repeats.remember(key, r.id.pid, smp, ids);
      out.frame_ids = ids;
      out.frame_generation = repeats.generation();
    }
    count(out);
    return out;
  }

  void count(const UnwoundSample& u) {
    stats.frames += u.frames.size();
    for (const ResolvedFrame& f : u.frames) ++stats.by_origin[static_cast<std::size_t>(f.origin)];
    if (u.walked) ++stops[u.why];
  }

  // The user part of a sample with a stack copy, walked from its registers
  // (`has`: the sampled ones' mask) into `out`: frames, why the walk ended.
  void walk_user(Space& s, const Sample& smp, const std::array<std::uint64_t, kX86R15 + 1>& reg, std::uint64_t has) {
    const auto have = [has](unsigned i) { return ((has >> i) & 1) != 0; };
    const std::uint64_t sp = reg[kX86Sp];
    if (!s.cache) s.cache = std::make_unique<StaticRuleCache<1024>>();
    s.cache->sync(s.table.primary().generation());
    Regs regs = Regs::amd64(reg[kX86Ip], sp, reg[kX86Bp]);
    // The other sampled registers: frame 0's FLEX rules may name them.
    static constexpr std::pair<unsigned, unsigned> kPerfToDwarf[] = {
        {kX86Ax, 0}, {kX86Dx, 1}, {kX86Cx, 2}, {kX86Bx, 3}, {kX86Si, 4}, {kX86Di, 5}};
    for (auto [p, d] : kPerfToDwarf)
      if (have(p)) regs.set(d, reg[p]);
    for (unsigned k = 0; k < 8; ++k)
      if (have(kX86R8 + k)) regs.set(8 + k, reg[kX86R8 + k]);
    // libunwind's perf accessor takes a word as outside the copy when it
    // ends at or after the copy's end - 8 (`addr + 8 >= end`).
    std::span<const std::byte> stack = smp.stack;
    if (opt.libunwind_stack_end) stack = stack.first(stack.size() >= 8 ? stack.size() - 8 : 0);
    const BufferMemory mem(stack, sp);
    const std::size_t cap = opt.max_stack - out.frames.size();
    View view{*this, s};
    process::WalkOptions wo;
    wo.fp_fallback = opt.fp_fallback;
    const process::WalkResult w =
        process::walk_chain(view, mem, regs, std::span<Frame>(frames.data(), cap),
                            std::span<process::RuleSource>(sources.data(), cap), wo, s.cache.get());
    for (std::size_t i = 0; i < w.count; ++i) {
      const Frame& f = frames[i];
      const FrameOrigin o = i == 0 ? FrameOrigin::kRegisters : origin_of(sources[i - 1]);
      // perf's libunwind unwinder records a caller's return address - 1,
      // except where the frame is a signal trampoline.
      user_frame(s, f.pc.value(), i > 0 && !(f.flags & kFrameSignal), o);
    }
    // Only a walk that ran off the top of the copy: a read below it (a
    // frame-pointer guess at a PC libunwind has no CFI for) is no step
    // libunwind takes.
    if (opt.libunwind_stack_end && w.reason == StopReason::kUnreadableMemory && w.address >= sp + stack.size() &&
        w.count > 0 && out.frames.size() < opt.max_stack) {
      ResolvedFrame f;
      f.ip = f.runtime_ip = ~std::uint64_t{0};
      f.origin = out.frames.back().origin;
      out.frames.push_back(f);
    }
    out.stop = w.reason;
    out.why = why(s, w);
    out.stop_address = w.address;
    out.stack_base = sp;
    out.stack_size = smp.stack.size();
  }

  std::string_view why(const Space& s, const process::WalkResult& w) {
    switch (w.reason) {
      case StopReason::kOutermost: return "outermost frame";
      case StopReason::kZeroPc: return "return address 0";
      case StopReason::kDepthLimit: return "max stack depth";
      case StopReason::kUnreadableMemory: return "stack copy ends";
      case StopReason::kCfaNotIncreasing: return "CFA not increasing";
      case StopReason::kBadRule: return "rule needs an unknown register";
      // The in-process backtrace's own reasons; no remote walk ends so.
      case StopReason::kNotInitialized:
      case StopReason::kUnsupported:
      case StopReason::kReadCheckRefused: return describe(w.reason);
      case StopReason::kNoSFrameForPc: {
        const MapEntry* m = s.find(w.address);
        if (!m) return "no module (JIT or anonymous code)";
        if (!m->dso || !m->dso->file) return "module file not found";
        if (w.fp_rejected) return "no unwind information; frame pointer rejected";
        return "no unwind information";
      }
    }
    return "?";
  }
};

Session::Session(const FileInfo& info, const SessionOptions& opt) : impl_(std::make_unique<Impl>(info, opt)) {}
Session::~Session() = default;
void Session::process(const Record& r) { impl_->process(r); }
const UnwoundSample& Session::unwind(const Record& r) { return impl_->unwind(r); }
std::string_view Session::comm(std::uint32_t tid) const { return impl_->comm(tid); }
FileTable& Session::files() const { return *impl_->opt.files; }

std::vector<ProcessMapping> Session::mappings(std::uint32_t pid) const {
  std::vector<ProcessMapping> out;
  auto it = impl_->spaces.find(pid);
  if (it == impl_->spaces.end() || !it->second) return out;
  for (const auto& [start, m] : it->second->maps) {
    ProcessMapping p;
    p.start = m.start;
    p.end = m.end;
    p.bias = m.bias;
    if (m.dso) {
      p.file = m.dso->file;
      p.path = m.dso->name;
      p.build_id = m.dso->build_id.empty() ? m.dso->file_build_id : m.dso->build_id;
    }
    out.push_back(std::move(p));
  }
  return out;
}

const SessionStats& Session::stats() const {
  impl_->stats.stops.clear();
  for (const auto& [why, n] : impl_->stops) impl_->stats.stops.emplace_back(std::string(why), n);
  return impl_->stats;
}

void unwound_callchain(const Record& r, const UnwoundSample& u, std::vector<std::uint64_t>& chain) {
  chain.clear();
  for (std::uint64_t i = 0; i < r.sample.callchain_nr && r.sample.callchain(i) != kContextUser; ++i)
    chain.push_back(r.sample.callchain(i));
  const std::size_t kernel_end = chain.size();
  for (const ResolvedFrame& f : u.frames) {
    if (f.origin == FrameOrigin::kKernel) continue;
    if (chain.size() == kernel_end) chain.push_back(kContextUser);
    chain.push_back(f.runtime_ip);
  }
}

}  // namespace sframe::perf
