// The ELF modules of a process: files, load biases, unwind sources, symbols.
#include <elf.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sframe/cfi.hpp"
#include "sframe/encode.hpp"
#include "sframe/process.hpp"

namespace sframe::process {
namespace {

// The mappings of one loaded image, in address order.
struct Group {
  std::vector<const Mapping*> maps;
};

std::vector<Group> group_images(const std::vector<Mapping>& maps) {
  std::vector<Group> out;
  for (const Mapping& m : maps) {
    const bool image = m.file_backed() || m.path == "[vdso]";
    if (!image) continue;
    // A new image starts at a new file, or where the same file is mapped from
    // offset 0 again (loaded twice).
    Group* cur = out.empty() ? nullptr : &out.back();
    const Mapping* last = cur ? cur->maps.back() : nullptr;
    if (!last || last->path != m.path || last->inode != m.inode || m.offset == 0) {
      out.push_back({});
      cur = &out.back();
    }
    cur->maps.push_back(&m);
  }
  std::erase_if(out, [](const Group& g) {
    return std::none_of(g.maps.begin(), g.maps.end(), [](const Mapping* m) { return m->exec; });
  });
  return out;
}

std::string hex_range(const Mapping& m) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%llx-%llx", static_cast<unsigned long long>(m.start),
                static_cast<unsigned long long>(m.end));
  return buf;
}

// Opens the file behind `g`: by path when it is still the mapped inode, else
// through the process's own view of it.
Expected<elf::ElfFile> open_image(pid_t pid, const Group& g, std::string& how) {
  const Mapping& m = *g.maps.front();
  struct stat st {};
  if (!m.deleted && ::stat(m.path.c_str(), &st) == 0 && st.st_ino == m.inode) {
    how = "";
    return elf::ElfFile::open(m.path);
  }
  const std::string proc = "/proc/" + std::to_string(pid);
  auto f = elf::ElfFile::open(proc + "/map_files/" + hex_range(m));
  if (f) {
    how = m.deleted ? "file deleted; read through /proc/PID/map_files" : "file replaced; read through /proc/PID/map_files";
    return f;
  }
  if (!m.deleted) {
    how = "read through /proc/PID/root";
    return elf::ElfFile::open(proc + "/root" + m.path);
  }
  return f;
}

// The vDSO image copied from the process into an anonymous file.
Expected<elf::ElfFile> open_vdso(const Group& g, const RemoteMemory& mem) {
  std::uint64_t lo = g.maps.front()->start, hi = g.maps.back()->end;
  if (hi <= lo || hi - lo > (64u << 20)) return make_error(Errc::kIoError, 0, EINVAL);
  std::vector<std::byte> image(hi - lo);
  if (mem.read(lo, image) != image.size()) return make_error(Errc::kIoError, 0, EIO);
  const int fd = ::memfd_create("sframe-vdso", MFD_CLOEXEC);
  if (fd < 0) return make_error(Errc::kIoError, 0, static_cast<std::uint64_t>(errno));
  std::size_t done = 0;
  while (done < image.size()) {
    const ssize_t n = ::write(fd, image.data() + done, image.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  auto f = done == image.size() ? elf::ElfFile::open("/proc/self/fd/" + std::to_string(fd))
                                : Expected<elf::ElfFile>(make_error(Errc::kIoError, 0, EIO));
  ::close(fd);  // ElfFile holds its own descriptor
  return f;
}

// bias such that absolute = link-time + bias, from the PT_LOAD segment that
// maps the file offset of `m`.
std::optional<std::uint64_t> load_bias(const elf::ElfFile& f, const Mapping& m, bool memory_image) {
  Elf* e = static_cast<Elf*>(f.native_handle());
  std::size_t phnum = 0;
  if (elf_getphdrnum(e, &phnum) != 0) return std::nullopt;
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    if (memory_image) {
      // A copied image (vDSO): its first PT_LOAD is at the start of the copy.
      return m.start - (ph.p_vaddr - ph.p_offset);
    }
    const std::uint64_t page_lo = ph.p_offset & ~std::uint64_t{4095};
    if (m.offset >= page_lo && m.offset < ph.p_offset + std::max<std::uint64_t>(ph.p_filesz, 1))
      return m.start - m.offset - (ph.p_vaddr - ph.p_offset);
  }
  return std::nullopt;
}

std::string error_words(const Error& e) {
  if (e.code == Errc::kIoError && e.value != 0) return std::strerror(static_cast<int>(e.value));
  return std::string(describe(e.code));
}

// Uses the module's own SFrame section if it has a usable one; else records
// why not in `why` and returns false.
bool load_own_sframe(LoadedModule& mod, const ModuleOptions& opt) {
  const elf::ElfFile& f = *mod.file;
  if (opt.ignore_sframe_sections) {
    mod.why = "SFrame section ignored";
    return false;
  }
  auto data = f.sframe_section();
  if (!data) {
    mod.why = data.error().code == Errc::kNoSFrameSection ? "no SFrame section" : error_words(data.error());
    return false;
  }
  auto owned = std::make_shared<const elf::SFrameSectionData>(std::move(*data));
  auto s = Section::parse(owned->bytes, owned->address);
  if (s && validate(*s, Strictness::kLenient)) {
    if (auto idx = FdeIndex::build(*s)) {
      mod.section_data = std::move(owned);
      mod.sframe = *s;
      mod.index = std::move(*idx);
      mod.source = UnwindSource::kSFrameSection;
      mod.why.clear();
      return true;
    }
  }
  mod.why = "SFrame section unusable";
  return false;
}

// The function is covered from its first to its last byte by `own`.
bool covered(const FdeIndex& own, std::uint64_t start, std::uint32_t size) {
  const auto at = [&](std::uint64_t pc) {
    auto m = own.find(pc);
    return m || m.error().code != Errc::kPcNotCovered;
  };
  return at(start) && at(start + (size ? size - 1 : 0));
}

// SFrame from the module's .eh_frame; `why` says what happened. For a module
// with its own section, only the functions that section lacks, as `extra`.
void generate_sframe(LoadedModule& mod) {
  const elf::ElfFile& f = *mod.file;
  const bool has_own = mod.source == UnwindSource::kSFrameSection;
  const std::string why_not = mod.why;
  const std::string sep = why_not.empty() ? "" : "; ";
  auto eh = f.section_bytes(".eh_frame");
  const std::uint64_t address = eh ? eh->header.address : 0;
  auto gen = cfi::generate(f, Version::kV3, address);
  if (!gen) {
    if (has_own) return;  // nothing to add: its own section is all there is
    mod.why = why_not + sep + "no usable .eh_frame (" + error_words(gen.error()) + ")";
    return;
  }
  if (has_own) {
    std::erase_if(gen->spec.functions,
                  [&](const FunctionSpec& fn) { return covered(*mod.index, fn.start_pc, fn.size); });
    mod.extra_functions = gen->spec.functions.size();
    if (gen->spec.functions.empty()) {
      mod.why = "its section covers every .eh_frame function";
      return;
    }
  }
  auto bytes = encode(gen->spec);
  if (!bytes) {
    mod.why = why_not + sep + "generated SFrame does not encode";
    return;
  }
  auto owned = std::make_shared<const std::vector<std::byte>>(std::move(*bytes));
  auto s = Section::parse(*owned, address);
  if (!s) {
    mod.why = why_not + sep + "generated SFrame does not parse";
    return;
  }
  auto idx = FdeIndex::build(*s);
  if (!idx) {
    mod.why = why_not + sep + "generated SFrame does not index";
    return;
  }
  if (has_own) {
    mod.extra_generated = std::move(owned);
    mod.extra = *s;
    mod.extra_index = std::move(*idx);
    mod.why = std::to_string(mod.extra_functions) + " .eh_frame functions it lacks generated";
    return;
  }
  mod.generated = std::move(owned);
  mod.sframe = *s;
  mod.index = std::move(*idx);
  mod.source = UnwindSource::kGenerated;
  mod.why = why_not + sep + "generated from .eh_frame";
}

}  // namespace

std::string_view to_string(UnwindSource s) noexcept {
  switch (s) {
    case UnwindSource::kSFrameSection:
      return "sframe";
    case UnwindSource::kGenerated:
      return "generated";
    case UnwindSource::kFramePointer:
      return "frame-pointer";
  }
  return "?";
}

bool LoadedModule::contains_exec(std::uint64_t pc) const noexcept {
  return std::any_of(exec_ranges.begin(), exec_ranges.end(),
                     [pc](const auto& r) { return pc >= r.first && pc < r.second; });
}

LoadedModules LoadedModules::load(pid_t pid, const std::vector<Mapping>& maps, const RemoteMemory& mem,
                                  const ModuleOptions& opt) {
  LoadedModules out;
  for (const Group& g : group_images(maps)) {
    LoadedModule mod;
    const Mapping& first = *g.maps.front();
    mod.path = first.path;
    mod.deleted = first.deleted;
    mod.start = first.start;
    mod.end = g.maps.back()->end;
    for (const Mapping* m : g.maps)
      if (m->exec) mod.exec_ranges.emplace_back(m->start, m->end);
    const bool vdso = first.path == "[vdso]";
    std::string how;
    auto f = vdso ? open_vdso(g, mem) : open_image(pid, g, how);
    if (!f) {
      mod.bias = first.start - first.offset;
      mod.why = "cannot open the file (" + error_words(f.error()) + ")";
      out.modules_.push_back(std::move(mod));
      continue;
    }
    mod.file = std::make_shared<const elf::ElfFile>(std::move(*f));
    const Mapping* exec = *std::find_if(g.maps.begin(), g.maps.end(), [](const Mapping* m) { return m->exec; });
    auto bias = load_bias(*mod.file, vdso ? first : *exec, vdso);
    mod.bias = bias ? *bias : first.start - first.offset;
    mod.how_opened = how;
    mod.symbols = elf::SymbolTable::read(*mod.file);
    const bool own = load_own_sframe(mod, opt);
    if (!opt.generate) {
      if (!own) mod.why += "; generation disabled";
    } else if (opt.on_demand) {
      mod.generation_pending = true;
    } else {
      generate_sframe(mod);
    }
    out.modules_.push_back(std::move(mod));
  }
  std::sort(out.modules_.begin(), out.modules_.end(),
            [](const LoadedModule& a, const LoadedModule& b) { return a.start < b.start; });
  for (const LoadedModule& m : out.modules_) {
    for (const auto& sym : m.symbols.symbols())
      if (sym.name == "__restore_rt" || sym.name == "__kernel_rt_sigreturn")
        out.trampolines_.push_back({sym.address + m.bias, sym.address + m.bias + std::max<std::uint64_t>(sym.size, 1)});
  }
  for (const Mapping& m : maps)
    if (m.exec && m.end > m.start) out.exec_ranges_.emplace_back(m.start, m.end);
  std::sort(out.exec_ranges_.begin(), out.exec_ranges_.end());
  out.rebuild_unwind_map();
  return out;
}

bool LoadedModules::executable(std::uint64_t addr) const noexcept {
  auto it = std::upper_bound(exec_ranges_.begin(), exec_ranges_.end(), addr,
                             [](std::uint64_t v, const auto& r) { return v < r.first; });
  if (it == exec_ranges_.begin()) return false;
  --it;
  return addr < it->second;
}

namespace {

// A new map (new generation: rule caches refill) over storage sized once;
// moving LoadedModules moves the vector's buffer, not the modules.
void fill_map(const std::vector<sframe::Module>& mods, std::vector<sframe::Module>& storage,
              std::unique_ptr<sframe::ModuleMap>& map) {
  storage.assign(mods.size(), sframe::Module{});
  map = std::make_unique<sframe::ModuleMap>(std::span<sframe::Module>(storage));
  for (const auto& m : mods) (void)map->add(m);
}

}  // namespace

void LoadedModules::rebuild_unwind_map() {
  std::vector<sframe::Module> mods, extra;
  for (const LoadedModule& m : modules_) {
    for (const auto& r : m.exec_ranges) {
      if (m.sframe) mods.push_back(sframe::Module{{r.first, r.second}, m.bias, *m.sframe, &*m.index});
      if (m.extra) extra.push_back(sframe::Module{{r.first, r.second}, m.bias, *m.extra, &*m.extra_index});
    }
  }
  fill_map(mods, unwind_storage_, unwind_map_);
  fill_map(extra, extra_storage_, extra_map_);
}

bool LoadedModules::generate_for(std::uint64_t pc) {
  auto it = std::find_if(modules_.begin(), modules_.end(), [pc](const LoadedModule& m) { return m.contains_exec(pc); });
  if (it == modules_.end() || !it->generation_pending) return false;
  it->generation_pending = false;
  generate_sframe(*it);
  if (it->source != UnwindSource::kGenerated && !it->extra) return false;
  rebuild_unwind_map();
  return true;
}

const LoadedModule* LoadedModules::find(std::uint64_t pc) const noexcept {
  // Modules do not overlap; the candidate is the last one starting at or
  // below pc.
  auto it = std::upper_bound(modules_.begin(), modules_.end(), pc,
                             [](std::uint64_t v, const LoadedModule& m) { return v < m.start; });
  if (it == modules_.begin()) return nullptr;
  --it;
  return it->contains_exec(pc) ? &*it : nullptr;
}

SymbolizedPc symbolize(const LoadedModules& modules, std::uint64_t pc) noexcept {
  SymbolizedPc out;
  out.module = modules.find(pc);
  if (!out.module) return out;
  if (auto hit = out.module->symbols.find(pc - out.module->bias)) {
    out.symbol = hit->symbol;
    out.name = hit->symbol->name;
    out.offset = hit->offset;
  }
  return out;
}

}  // namespace sframe::process
