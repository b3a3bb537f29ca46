// SPDX-License-Identifier: MIT
// `sframe lookup`: the function, FRE and CFA/RA/FP rules covering PCs, given
// as `FILE PC...`, `FILE+OFFSET [PC...]`, `PC...` (the tool itself) or
// `--pid PID ADDRESS...` (runtime addresses in a live process).
#include <fmt/format.h>
#include <gelf.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include "cli.hpp"
#include "commands.hpp"
#include "json_stream.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/process/process.hpp"
#include "sframe/elf/symbols.hpp"

namespace sframe::tools {
namespace {

bool is_file(const std::string& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

// The load base of FILE+OFFSET: the lowest PT_LOAD p_vaddr rounded down to
// its alignment (as the loader maps it; 0 for a PIE or a shared object),
// 0 for a file without PT_LOAD (a relocatable object).
std::uint64_t load_base(const elf::ElfFile& f) {
  Elf* e = static_cast<Elf*>(f.native_handle());
  std::size_t phnum = 0;
  if (!e || elf_getphdrnum(e, &phnum) != 0) return 0;
  std::optional<std::uint64_t> base;
  for (std::size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(e, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    const std::uint64_t align = ph.p_align > 1 ? ph.p_align : 1;
    const std::uint64_t b = (ph.p_vaddr - ph.p_offset) & ~(align - 1);
    if (!base || b < *base) base = b;
  }
  return base.value_or(0);
}

// Where an FDE of a relocatable object really starts: its start field's
// relocation names a symbol (a section symbol, or a function), and the
// function starts at symbol + addend in that section.
struct RelStart {
  std::string where;  // section (or symbol) name
  std::uint64_t start = 0;
};
std::map<std::uint64_t, RelStart> relocated_starts(const elf::ElfFile& f, const std::string& section) {
  std::map<std::uint64_t, RelStart> out;
  Elf* e = static_cast<Elf*>(f.native_handle());
  std::size_t shstrndx = 0;
  if (!e || elf_getshdrstrndx(e, &shstrndx) != 0) return out;
  for (Elf_Scn* scn = elf_nextscn(e, nullptr); scn; scn = elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA) continue;
    Elf_Scn* target = elf_getscn(e, sh.sh_info);
    GElf_Shdr tsh;
    if (!target || !gelf_getshdr(target, &tsh)) continue;
    const char* tname = elf_strptr(e, shstrndx, tsh.sh_name);
    if (!tname || section != tname) continue;
    Elf_Scn* symscn = elf_getscn(e, sh.sh_link);
    GElf_Shdr symsh;
    Elf_Data* syms = symscn ? elf_getdata(symscn, nullptr) : nullptr;
    Elf_Data* rel = elf_getdata(scn, nullptr);
    if (!syms || !rel || !gelf_getshdr(symscn, &symsh) || sh.sh_entsize == 0) continue;
    for (std::size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Rela r;
      GElf_Sym sym;
      if (!gelf_getrela(rel, static_cast<int>(i), &r)) continue;
      if (!gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym)) continue;
      RelStart s;
      if (GELF_ST_TYPE(sym.st_info) == STT_SECTION) {
        GElf_Shdr ssh;
        Elf_Scn* sscn = elf_getscn(e, sym.st_shndx);
        const char* n = sscn && gelf_getshdr(sscn, &ssh) ? elf_strptr(e, shstrndx, ssh.sh_name) : nullptr;
        s.where = n ? n : "?";
      } else {
        const char* n = elf_strptr(e, symsh.sh_link, sym.st_name);
        s.where = n ? n : "?";
      }
      s.start = sym.st_value + static_cast<std::uint64_t>(r.r_addend);
      out[r.r_offset] = s;
    }
  }
  return out;
}

// One input opened for lookups.
struct Opened {
  std::optional<Loaded> l;
  std::optional<FdeIndex> index;
  elf::SymbolTable syms;
  std::string why;
  bool relocatable = false;
  // Relocatable objects: every FDE, at its section-relative start.
  struct RelFde {
    Fde fde;
    std::string where;
  };
  std::vector<RelFde> rel_fdes;
};

std::unique_ptr<Opened> open_input(const std::string& arg, const std::string& section) {
  auto o = std::make_unique<Opened>();
  LoadOptions lo;
  lo.section = section;
  o->l = load(arg, lo, o->why);
  if (!o->l) return o;
  auto index = FdeIndex::build(o->l->section);
  if (!index) {
    o->why = error_text(index.error());
    o->l.reset();
    return o;
  }
  o->index = std::move(*index);
  if (o->l->file) {
    o->syms = elf::SymbolTable::read(*o->l->file);
    o->relocatable = o->l->file->info().type == ET_REL;
  }
  if (o->relocatable) {
    const auto starts = relocated_starts(*o->l->file, o->l->data.name);
    const Section& s = o->l->section;
    for (std::uint32_t i = 0; i < s.num_fdes(); ++i) {
      auto f = s.fde(i);
      if (!f) continue;
      Opened::RelFde rf{*f, ""};
      if (auto it = starts.find(f->start_field_offset); it != starts.end()) {
        rf.fde.start_pc = it->second.start;
        rf.where = it->second.where;
      }
      o->rel_fdes.push_back(std::move(rf));
    }
  }
  return o;
}

class LookupCommand final : public Command {
 public:
  std::string_view name() const override { return "lookup"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("lookup", "Show the function and CFA/RA/FP rules covering PCs");
    app_->add_option("args", args_,
                     "FILE PC..., FILE+OFFSET [PC...], PC... (in this program itself), or with --pid: ADDRESS...; "
                     "FILE: ELF file, or a raw section as RAW[@ADDRESS]; PCs: hex as 0x..., or decimal");
    app_->add_option("--pid", pid_, "Look up runtime ADDRESSes in the modules mapped by process PID");
    app_->add_option("--section", opt_.section, "Name of the SFrame section")->capture_default_str();
    app_->add_flag("--json", opt_.json, "Print JSON (schema: docs/json.md)");
  }

  int run() override {
    if (!pid_.empty()) return run_pid();
    if (args_.empty()) throw UsageError("FILE and PC required (lookup FILE PC..., FILE+OFFSET, or PC...)");
    std::string file = args_[0];
    std::vector<std::string> pcs(args_.begin() + 1, args_.end());
    std::optional<std::uint64_t> offset;
    std::string why;
    if (!is_file(file)) {
      const auto plus = file.rfind('+');
      if (plus != std::string::npos && plus > 0 && is_file(file.substr(0, plus))) {
        offset = parse_number_or_throw(file.substr(plus + 1), "offset after +:");
        file = file.substr(0, plus);
      } else if (file.find('@') == std::string::npos && parse_number(file, why)) {
        pcs = args_;  // only PCs: looked up in the tool itself, as dump and stat read it
        file = self_path();
      }
    }
    if (pcs.empty() && !offset) throw UsageError(fmt::format("{}: a PC is required (lookup FILE PC...)", file));
    // A refused number is bad usage (exit 2, docs/tool.md), found before
    // any file is read.
    const std::vector<std::uint64_t> pc_values = parse_all(pcs);
    split_input(file);
    return output(file, [&](JsonStream* js) {
      if (js) js->member("file", file);
      auto o = open_input(file, opt_.section);
      if (!o->l) return failed(js, file, o->why);
      if (o->l->raw) {
        if (js) {
          js->member("raw", raw_json(*o->l));
        } else {
          fmt::print("{}: {}\n", o->l->path, raw_note(*o->l));
        }
      }
      int rc = 0;
      if (js) {
        js->key("results");
        js->begin_array();
      }
      if (offset) {
        const std::uint64_t base = o->l->file ? load_base(*o->l->file) : 0;
        Json r;
        const std::string given = fmt::format("{}+0x{:x}", file, *offset);
        r["as_given"] = given;
        if (!one(*o, base + *offset, given + " = ", r)) rc = 1;
        if (js) js->value(r);
      }
      for (const std::uint64_t pc : pc_values) {
        Json r;
        if (!one(*o, pc, "", r)) rc = 1;
        if (js) js->value(r);
      }
      if (js) js->end();
      return rc;
    });
  }

 private:
  // The numbers of `texts`, or UsageError naming the first refused one.
  static std::vector<std::uint64_t> parse_all(const std::vector<std::string>& texts) {
    std::vector<std::uint64_t> out;
    out.reserve(texts.size());
    std::string why;
    for (const auto& text : texts) {
      const auto v = parse_number(text, why);
      if (!v) throw UsageError(why);
      out.push_back(*v);
    }
    return out;
  }

  // Runs `body` with the JSON document to write the results to (--json,
  // streamed: one result at a time) or without (text); `where` names the
  // input in a message.
  int output(const std::string& where, const std::function<int(JsonStream*)>& body) {
    if (!opt_.json) return body(nullptr);
    return stream_document("lookup", where, [&](JsonStream& js) { return body(&js); });
  }

  // A failure of the whole command: said on stderr and as the document's
  // `error`.
  static int failed(JsonStream* js, const std::string& where, const std::string& why) {
    complain(where, why);
    if (js) js->member("error", why);
    return 1;
  }

  // Looks `pc` (link-time) up in `o`, printing one result (text prefixed by
  // `prefix`) and filling `r`; false when no FDE covers it.
  bool one(const Opened& o, std::uint64_t pc, const std::string& prefix, Json& r) {
    r["pc"] = hex(pc);
    const Section& s = o.l->section;
    std::optional<Match> found;
    std::string reason;
    std::string chosen;  // relocatable: which FDE of which
    std::string where;
    if (o.relocatable) {
      std::vector<const Opened::RelFde*> covering;
      for (const auto& rf : o.rel_fdes)
        if (pc >= rf.fde.start_pc && pc - rf.fde.start_pc < rf.fde.size) covering.push_back(&rf);
      if (covering.empty()) {
        reason = std::string(describe(LookupErrc::kPcNotCovered));
      } else {
        const auto* c = covering.front();
        auto m = find_in_fde(s, c->fde, pc);
        if (m) found = *m; else reason = std::string(describe(m.error().code()));
        where = c->where;
        chosen = fmt::format("FDE {} of {} covering 0x{:x}", c->fde.index, covering.size(), pc);
        Json also = Json::array();
        std::string also_text;
        for (std::size_t i = 1; i < covering.size(); ++i) {
          also_text += fmt::format("{}FDE {}{}", i == 1 ? "; also " : ", ", covering[i]->fde.index,
                                   covering[i]->where.empty() ? "" : " in " + covering[i]->where);
          Json a;
          a["fde"] = covering[i]->fde.index;
          if (!covering[i]->where.empty()) a["section"] = covering[i]->where;
          also.push_back(std::move(a));
        }
        chosen += also_text;
        r["covering_fdes"] = covering.size();
        r["also"] = std::move(also);
        if (!where.empty()) r["section"] = where;
      }
    } else {
      auto m = o.index->find(pc);
      if (m) found = *m; else reason = std::string(describe(m.error().code()));
    }
    std::string name;
    std::optional<std::uint64_t> sym_off;
    if (!o.relocatable) {
      if (const auto sym = o.syms.find(pc)) {
        name = o.syms.display_name(*sym->symbol);
        sym_off = sym->offset;
      }
    }
    const std::string at = where.empty() ? "" : " in " + where;
    const std::string sym_text = sym_off ? fmt::format(" <{}+0x{:x}>", name, *sym_off) : std::string();
    r["found"] = found.has_value();
    if (sym_off) r["symbol"] = name;
    if (!found) {
      r["reason"] = reason;
      if (!opt_.json)
        fmt::print("{}0x{:x}{}{}: {}{}\n", prefix, pc, at, sym_text, reason, chosen.empty() ? "" : " (" + chosen + ")");
      return false;
    }
    r["fde"] = fde_json(found->fde);
    r["fre"] = fre_json(s, found->fde, found->fre, found->row);
    if (!opt_.json) {
      const std::string fde_text =
          chosen.empty() ? fmt::format("FDE {}", found->fde.index) : chosen;
      fmt::print("{}0x{:x}{}{}: function 0x{:x}, size {} ({}{}{})\n", prefix, pc, at, sym_text, found->fde.start_pc,
                 found->fde.size, fde_text, found->fde.pc_type == PcType::kMask ? ", PC mask" : "",
                 found->fde.fde_type == FdeType::kFlex ? ", flexible" : "");
      fmt::print("  FRE {} from +0x{:x}: {}\n", found->fre.index, found->fre.start_offset,
                 rules_in_words(s, found->row));
    }
    return true;
  }

  int run_pid() {
    long pid = 0;
    bool ok = !pid_.empty() && pid_.size() <= 10 && pid_[0] != '0';
    for (char c : pid_) ok = ok && c >= '0' && c <= '9';
    if (ok) pid = std::stol(pid_);
    if (!ok || pid <= 0 || pid > INT_MAX)
      throw UsageError(fmt::format("--pid {}: not a process ID (a positive decimal number, as ps shows it)", pid_));
    if (args_.empty()) throw UsageError("--pid: an ADDRESS is required (lookup --pid PID ADDRESS...)");
    const std::vector<std::uint64_t> addrs = parse_all(args_);
    return output(fmt::format("process {}", pid), [&](JsonStream* js) { return lookup_in_process(js, pid, addrs); });
  }

  int lookup_in_process(JsonStream* js, long pid, const std::vector<std::uint64_t>& addrs) {
    if (js) js->member("pid", pid);
    auto maps = process::read_maps(static_cast<pid_t>(pid));
    if (!maps) {
      // No /proc/PID (proc(5)) is no process PID: ENOENT's "No such file or
      // directory" would name a file the user never gave.
      const Error& e = maps.error();
      const bool gone = e.code() == IoErrc::kIoError && e.value == ENOENT;
      return failed(js, fmt::format("process {}", pid),
                    gone ? std::string("no such process")
                         : errno_or(e, "cannot read its memory map (no such process?)"));
    }
    process::RemoteMemory mem(static_cast<pid_t>(pid));
    process::ModuleOptions mo;
    mo.generate = false;
    auto mods = process::LoadedModules::load(static_cast<pid_t>(pid), *maps, mem, mo);
    std::map<std::string, std::unique_ptr<Opened>> opened;
    int rc = 0;
    if (js) {
      js->key("results");
      js->begin_array();
    }
    for (const std::uint64_t addr : addrs) {
      Json r;
      r["address"] = hex(addr);
      const process::LoadedModule* m = mods.find(addr);
      if (!m) {
        rc = 1;
        r["pc"] = hex(addr);
        r["found"] = false;
        r["reason"] = fmt::format("in no executable mapping of process {}", pid);
        if (!js) fmt::print("0x{:x}: in no executable mapping of process {}\n", addr, pid);
      } else {
        r["module"] = m->path;
        const std::uint64_t pc = addr - m->bias;
        auto& o = opened[m->path];
        if (!o) o = open_input(m->path, opt_.section);
        if (!o->l) {
          rc = 1;
          r["pc"] = hex(pc);
          r["found"] = false;
          r["reason"] = o->why;
          if (!js) fmt::print("0x{:x} in {} at 0x{:x}: {}\n", addr, m->path, pc, o->why);
        } else if (!one(*o, pc, fmt::format("0x{:x} in {} at ", addr, m->path), r)) {
          rc = 1;
        }
      }
      if (js) js->value(r);
    }
    if (js) js->end();
    return rc;
  }

  static std::string errno_or(const Error& e, const std::string& fallback) {
    if (e.code() == IoErrc::kIoError && e.value != 0) return std::strerror(static_cast<int>(e.value));
    return fallback;
  }

  LookupOptions opt_;
  std::vector<std::string> args_;
  std::string pid_;
};

}  // namespace

std::unique_ptr<Command> make_lookup_command() { return std::make_unique<LookupCommand>(); }

}  // namespace sframe::tools
