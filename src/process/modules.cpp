// SPDX-License-Identifier: MIT
// The ELF modules of a process: files, load biases, unwind sources, symbols.
#include <elf.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "sframe/cfi/cfi.hpp"
#include "sframe/unwind/module_table.hpp"
#include "sframe/unwind/module_unwind.hpp"
#include "sframe/process/process.hpp"

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

// A memory image (the vDSO's) as a file, in an anonymous one.
Expected<elf::ElfFile> open_memory_image(std::span<const std::byte> image) {
  const int fd = ::memfd_create("sframe-vdso", MFD_CLOEXEC);
  if (fd < 0) return make_error(IoErrc::kIoError, 0, static_cast<std::uint64_t>(errno));
  std::size_t done = 0;
  while (done < image.size()) {
    const ssize_t n = ::write(fd, image.data() + done, image.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  auto f = done == image.size() ? elf::ElfFile::open("/proc/self/fd/" + std::to_string(fd))
                                : Expected<elf::ElfFile>(make_error(IoErrc::kIoError, 0, EIO));
  ::close(fd);  // ElfFile holds its own descriptor
  return f;
}

// The vDSO image copied from the process into an anonymous file.
Expected<elf::ElfFile> open_vdso(const Group& g, const RemoteMemory& mem) {
  std::uint64_t lo = g.maps.front()->start, hi = g.maps.back()->end;
  if (hi <= lo || hi - lo > (64u << 20)) return make_error(IoErrc::kIoError, 0, EINVAL);
  std::vector<std::byte> image(hi - lo);
  if (mem.read(lo, image) != image.size()) return make_error(IoErrc::kIoError, 0, EIO);
  return open_memory_image(image);
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
  if (e.code() == IoErrc::kIoError && e.value != 0) return std::strerror(static_cast<int>(e.value));
  return std::string(describe(e.code()));
}

}  // namespace

cfi::ModuleImage module_image(const elf::ElfFile& f, const Expected<elf::SFrameSectionData>& own) {
  cfi::ModuleImage img;
  if (own) {
    img.sframe = own->bytes;
    img.sframe_address = own->address;
  }
  if (auto hdr = f.section_bytes(".eh_frame_hdr")) {
    img.eh_frame_hdr = hdr->bytes;
    img.eh_frame_hdr_address = hdr->header.address;
  }
  img.has_cfi = cfi::cfi_sources(f).has_value();
  Elf* e = static_cast<Elf*>(f.native_handle());
  std::size_t size = 0;
  const char* raw = elf_rawfile(e, &size);
  std::size_t phnum = 0;
  if (!raw || elf_getphdrnum(e, &phnum) != 0) return img;
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, static_cast<int>(i), &ph) || ph.p_offset > size || ph.p_filesz > size - ph.p_offset) continue;
    const std::span bytes(reinterpret_cast<const std::byte*>(raw) + ph.p_offset, ph.p_filesz);
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
      img.code.push_back({ph.p_vaddr, bytes});
    } else if (ph.p_type == PT_GNU_EH_FRAME && img.eh_frame_hdr.empty() && ph.p_filesz != 0) {
      // No section headers (stripped): the segment is the same table.
      img.eh_frame_hdr = bytes;
      img.eh_frame_hdr_address = ph.p_vaddr;
    }
  }
  return img;
}

namespace {

// The views of LoadedModule from its builder's sections.
void take_views(LoadedModule& mod) {
  const cfi::ModuleUnwind& u = *mod.unwind;
  mod.source = u.source();
  // A usable section has an FdeIndex, a RowIndex or both (here both: the
  // builder runs with fde_index_with_rows and without merge_own); the
  // views take what there is.
  if (u.primary().usable()) {
    mod.sframe = *u.primary().section;
    mod.index = u.primary().index;
  }
  if (u.extra().usable()) {
    mod.extra = *u.extra().section;
    mod.extra_index = u.extra().index;
  }
  mod.extra_functions = u.extra_functions();
  mod.why = mod.source == ModuleSource::kNative && u.extra_functions() == 0 && !u.needs_generation()
                ? std::string(u.missing_fdes() == 0 ? "" : u.reason())
                : u.reason();
}

// Builds the module's unwind information with the shared builder (no
// generation yet: see generate_sframe).
void build_unwind(LoadedModule& mod, const ModuleOptions& opt) {
  const elf::ElfFile& f = *mod.file;
  auto own = f.sframe_section();
  std::string own_error;
  if (!own && own.error().code() != ElfErrc::kNoSFrameSection) own_error = error_words(own.error());
  cfi::ModuleUnwindOptions uo;
  uo.version = Version::kV3;
  uo.ignore_own = opt.ignore_sframe_sections;
  mod.unwind = std::make_shared<cfi::ModuleUnwind>(cfi::ModuleUnwind::build(module_image(f, own), uo));
  take_views(mod);
  if (!own_error.empty()) mod.why = own_error + "; " + mod.why;
}

// SFrame from the module's .eh_frame for the functions its own section
// lacks (all of them without one), by the shared builder.
void generate_sframe(LoadedModule& mod) {
  if (!mod.unwind || !mod.unwind->needs_generation()) return;
  auto eh = mod.file->section_bytes(".eh_frame");
  (void)cfi::generate(*mod.unwind, *mod.file, eh ? eh->header.address : 0);
  take_views(mod);
}

}  // namespace

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
    build_unwind(mod, opt);
    for (const AddressRange& t : mod.unwind->trampolines())
      out.trampolines_.push_back({t.begin + mod.bias, t.end + mod.bias});
    if (!mod.unwind->needs_generation()) {
    } else if (!opt.generate) {
      if (mod.source != ModuleSource::kNative) mod.why += "; generation disabled";
    } else if (opt.on_demand) {
      // One FDE at a time where .eh_frame_hdr leads to it; else the whole
      // module on first need.
      mod.generation_pending = true;
      (void)cfi::enable_on_demand(*mod.unwind, *mod.file);
    } else {
      generate_sframe(mod);
    }
    out.modules_.push_back(std::move(mod));
  }
  std::sort(out.modules_.begin(), out.modules_.end(),
            [](const LoadedModule& a, const LoadedModule& b) { return a.start < b.start; });
  // Trampolines by code (above) and, from the file, by symbol.
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

void LoadedModules::rebuild_unwind_map() {
  // One placement per executable mapping: a module's sections (and FDEs
  // generated one at a time, cut to the mapping) in each.
  ModuleTable::Entries e;
  for (const LoadedModule& m : modules_)
    if (m.unwind)
      for (const auto& r : m.exec_ranges) e.add(*m.unwind, {r.first, r.second}, m.bias);
  table_.assign(e);
}

bool LoadedModules::generate_for(std::uint64_t pc) {
  auto it = std::find_if(modules_.begin(), modules_.end(), [pc](const LoadedModule& m) { return m.contains_exec(pc); });
  if (it != modules_.end() && it->unwind && it->unwind->on_demand()) {
    // The FDE covering pc alone, into the map the placement rule names;
    // true only when that added it (a known one is in the maps already:
    // the walk found no rule in it).
    const auto r = std::find_if(it->exec_ranges.begin(), it->exec_ranges.end(),
                                [pc](const auto& x) { return pc >= x.first && pc < x.second; });
    const std::size_t before = it->unwind->generated_fdes().size();
    const ModuleTable::Generated g = table_.generate_for_pc(*it->unwind, {r->first, r->second}, it->bias, pc);
    if (it->unwind->generated_fdes().size() != before) {
      it->generation_pending = false;
      take_views(*it);  // the source becomes kGenerated with a first FDE
    }
    return g == ModuleTable::Generated::kAdded;
  }
  if (it == modules_.end() || !it->generation_pending) return false;
  it->generation_pending = false;
  generate_sframe(*it);
  if (!it->unwind->extra().usable() && it->source != ModuleSource::kGenerated) return false;
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

// ---------------------------------------------------------------------------
// Source lines and inline frames (libdwfl, modules reported offline).

namespace {

// Where separate debug files are looked for: beside the file, in .debug/,
// and under /usr/lib/debug (also by build ID: .build-id/xx/yyyy.debug).
char g_debuginfo_dirs[] = ":.debug:/usr/lib/debug";
char* g_debuginfo_path = g_debuginfo_dirs;

const Dwfl_Callbacks g_dwfl_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &g_debuginfo_path,
};

// eu-stack's die_name(): the linkage name (demangled), else DW_AT_name, both
// through DW_AT_abstract_origin / DW_AT_specification.
std::string die_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
  if (name == nullptr) name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
  if (name == nullptr) name = dwarf_diename(die);
  if (name == nullptr) return {};
  return elf::demangle(name);
}

bool function_like(int tag) {
  return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_entry_point;
}

// The line-table position of `pc` in `mod`.
SourceFrame line_of(Dwfl_Module* mod, Dwarf_Addr pc) {
  SourceFrame f;
  if (Dwfl_Line* l = dwfl_module_getsrc(mod, pc)) {
    int line = 0, col = 0;
    if (const char* file = dwfl_lineinfo(l, nullptr, &line, &col, nullptr, nullptr)) {
      f.file = file;
      f.line = line > 0 ? line : 0;
      f.column = f.line > 0 && col > 0 ? col : 0;
    }
  }
  return f;
}

// The call site recorded in inlined subroutine `die` of the CU `cudie`.
void call_site(Dwarf_Die* cudie, Dwarf_Die* die, SourceFrame& f) {
  Dwarf_Files* files = nullptr;
  if (dwarf_getsrcfiles(cudie, &files, nullptr) != 0) return;
  Dwarf_Attribute attr;
  Dwarf_Word val = 0;
  if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &val) != 0) return;
  const char* file = dwarf_filesrc(files, val, nullptr, nullptr);
  if (file == nullptr) return;
  f.file = file;
  if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &val) != 0) return;
  f.line = static_cast<int>(val);
  if (dwarf_formudata(dwarf_attr(die, DW_AT_call_column, &attr), &val) == 0 && f.line > 0)
    f.column = static_cast<int>(val);
}

}  // namespace

struct SourceLines::Impl {
  Dwfl* dwfl = nullptr;
  ~Impl() {
    if (dwfl) dwfl_end(dwfl);
  }
};

SourceLines::SourceLines(const LoadedModules& modules) : impl_(std::make_unique<Impl>()) {
  impl_->dwfl = dwfl_begin(&g_dwfl_callbacks);
  if (!impl_->dwfl) return;
  dwfl_report_begin(impl_->dwfl);
  for (const LoadedModule& m : modules.modules()) {
    // Only files reachable by their path (libdwfl opens them itself).
    if (m.path.empty() || m.path.front() != '/' || m.deleted || !m.how_opened.empty() || !m.file) continue;
    // Address = link-time address + bias (add_p_vaddr: the first PT_LOAD's
    // address is added to the base, as libdwfl's own process reporting does).
    dwfl_report_elf(impl_->dwfl, m.path.c_str(), m.path.c_str(), -1, m.bias, true);
  }
  dwfl_report_end(impl_->dwfl, nullptr, nullptr);
}

SourceLines::SourceLines(SourceLines&& o) noexcept = default;
SourceLines& SourceLines::operator=(SourceLines&& o) noexcept = default;
SourceLines::~SourceLines() = default;

SourceFrame SourceLines::line(std::uint64_t pc) const {
  if (!impl_ || !impl_->dwfl) return {};
  Dwfl_Module* mod = dwfl_addrmodule(impl_->dwfl, pc);
  return mod ? line_of(mod, pc) : SourceFrame{};
}

std::vector<SourceFrame> SourceLines::inline_frames(std::uint64_t pc) const {
  std::vector<SourceFrame> out;
  if (!impl_ || !impl_->dwfl) return out;
  Dwfl_Module* mod = dwfl_addrmodule(impl_->dwfl, pc);
  if (!mod) return out;
  Dwarf_Addr bias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(mod, pc, &bias);
  if (!cudie) return out;
  // The innermost function-like scope with a name (eu-stack -d).
  Dwarf_Die* scopes = nullptr;
  const int n = dwarf_getscopes(cudie, pc - bias, &scopes);
  Dwarf_Die die{};
  std::string name;
  for (int i = 0; i < n && name.empty(); ++i) {
    if (!function_like(dwarf_tag(&scopes[i]))) continue;
    name = die_name(&scopes[i]);
    if (!name.empty()) die = scopes[i];
  }
  std::free(scopes);
  if (name.empty()) return out;
  // From it outward (eu-stack -i): each inlined subroutine's caller, with
  // the call site, up to the out-of-line function.
  scopes = nullptr;
  const int m = dwarf_getscopes_die(&die, &scopes);
  if (m <= 0) {
    std::free(scopes);
    return out;
  }
  SourceFrame first = line_of(mod, pc);
  first.function = std::move(name);
  out.push_back(std::move(first));
  Dwarf_Die* last = &scopes[0];
  for (int i = 1; i < m; ++i) {
    Dwarf_Die* scope = &scopes[i];
    const int tag = dwarf_tag(scope);
    if (!function_like(tag)) continue;
    SourceFrame f;
    f.function = die_name(scope);
    call_site(cudie, last, f);
    out.push_back(std::move(f));
    if (tag == DW_TAG_subprogram) break;
    last = scope;
  }
  std::free(scopes);
  return out;
}

Expected<elf::ElfFile> own_vdso() {
  // The kernel passes the image's address in the auxiliary vector; its
  // extent is that of its ELF contents (headers, segments, section
  // headers), which the kernel maps whole. The kernel's own image: its
  // headers are taken as the dynamic loader takes them.
  const auto base = static_cast<std::uintptr_t>(::getauxval(AT_SYSINFO_EHDR));
  if (base == 0) return make_error(IoErrc::kIoError, 0, ENOENT);
  Elf64_Ehdr eh;
  std::memcpy(&eh, reinterpret_cast<const void*>(base), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 64 || eh.e_phoff > (64u << 20))
    return make_error(IoErrc::kIoError, 0, EINVAL);
  std::uint64_t size = std::uint64_t{eh.e_shoff} + std::uint64_t{eh.e_shnum} * eh.e_shentsize;
  size = std::max<std::uint64_t>(size, eh.e_phoff + std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr));
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, reinterpret_cast<const void*>(base + eh.e_phoff + i * sizeof ph), sizeof ph);
    if (ph.p_type == PT_LOAD) size = std::max<std::uint64_t>(size, ph.p_offset + ph.p_filesz);
  }
  if (size > (64u << 20)) return make_error(IoErrc::kIoError, 0, EINVAL);
  // Our own mapping, read in place.
  return open_memory_image(std::span<const std::byte>(reinterpret_cast<const std::byte*>(base), size));
}

}  // namespace sframe::process
