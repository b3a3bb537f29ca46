// SPDX-License-Identifier: MIT
// `sframe verify`: every rule of the specification, then the same recovery
// rules as the file's DWARF CFI.
#include <elf.h>
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "cli.hpp"
#include "commands.hpp"
#include "json_stream.hpp"
#include "sframe/cfi/cfi.hpp"
#include "sframe/format/consumers.hpp"
#include "sframe/elf/symbols.hpp"

namespace sframe::tools {
namespace {

std::string where(const elf::SymbolTable& syms, std::uint64_t pc) {
  const auto s = syms.find(pc);
  return s ? fmt::format("{}+0x{:x}", syms.display_name(*s->symbol), s->offset) : std::string("?");
}

// Replaces the SFrame section of `l` by the raw section RAW[@ADDRESS]
// (default address: the file's own section's).
bool use_raw(Loaded& l, const std::string& arg, std::string& why) {
  const InputName in = split_input(arg);
  const auto kind = identify(in.path, why);
  if (!kind) {
    why = fmt::format("{}: {}", in.path, why);
    return false;
  }
  if (*kind != FileKind::kRaw) {
    why = fmt::format("{}: --raw takes a raw SFrame section (gen -o, merge -o), not an ELF file", in.path);
    return false;
  }
  auto bytes = read_all(in.path, why);
  if (!bytes) {
    why = fmt::format("{}: {}", in.path, why);
    return false;
  }
  l.data.owned = std::move(*bytes);
  l.data.bytes = l.data.owned;
  if (in.address) l.data.address = *in.address;
  l.address_given = true;  // the file's own section address is not "assumed 0"
  l.data.name = in.path;
  auto sec = Section::parse(l.data.bytes, l.data.address);
  Expected<void> ok = sec ? validate(*sec, Strictness::kStrict) : Expected<void>(Unexpected{sec.error()});
  if (!ok) {
    why = fmt::format("{}: {}", in.path, error_text(ok.error()));
    return false;
  }
  l.section = *sec;
  return true;
}

// The consumers' verdicts on one section (docs/consumers.md): the rules are
// the library's (check_consumer); this only selects and prints them.
struct ConsumerVerdict {
  bool failed = false;
  std::string text;   // lines printed after the verdict line
  std::string error;  // why it failed, for stderr
};

// File facts for the rules that need the ELF file, or why there are none.
std::optional<FileFacts> file_facts(const Loaded& l, bool raw_given, std::string& why_not) {
  if (l.raw || raw_given || !l.file) {
    why_not = "a raw section has no file segments (PT_LOAD)";
    return std::nullopt;
  }
  auto f = elf::consumer_facts(*l.file, l.data);
  if (!f) why_not = "a relocatable object has no segments (PT_LOAD)";
  return f;
}

std::string violation_text(const ConsumerViolation& v) {
  const ConsumerRuleInfo& r = rule_info(v.rule);
  std::string where = fmt::format("byte 0x{:x}", v.offset);
  if (v.fde != kNoIndex) where += fmt::format(", FDE {}", v.fde);
  if (v.fre != kNoIndex) where += fmt::format(", FRE {}", v.fre);
  return fmt::format("{}: {} [{}] ({}, value 0x{:x})", consumer_name(r.consumer), r.words, r.id, where, v.value);
}

// `consumers` gets each consumer's verdict as JSON (bounded: at most
// check_consumer()'s 64 violations each).
ConsumerVerdict check_consumers(const Loaded& l, const std::string& requested, bool raw_given, Json& consumers) {
  ConsumerVerdict out;
  const Version v = l.section.version();
  std::string why_no_file;
  const std::optional<FileFacts> facts = file_facts(l, raw_given, why_no_file);
  const bool all = requested == "all";
  std::vector<std::string> accept, reject;
  std::size_t selected_reading = 0;
  consumers = Json::array();
  for (Consumer c : kAllConsumers) {
    const bool reads = reads_version(c, v);
    // "all": every consumer that reads this version; a named one: that one.
    const bool selected = all ? reads : requested == consumer_name(c);
    const ConsumerReport rep = check_consumer(l.section, c, facts ? &*facts : nullptr);
    const std::string name(consumer_name(c));
    Json cj = {{"consumer", name},      {"reads_version", reads},   {"requested", selected},
               {"accepted", rep.accepted()}, {"complete", rep.complete}, {"omitted", rep.omitted}};
    cj["file_rules"] = {{"checked", rep.file_rules_checked}};
    if (!rep.file_rules_checked) cj["file_rules"]["reason"] = why_no_file;
    Json vs = Json::array();
    for (const auto& x : rep.violations) {
      const ConsumerRuleInfo& r = rule_info(x.rule);
      Json vj = {{"rule", std::string(r.id)}, {"words", std::string(r.words)}, {"offset", x.offset},
                 {"value", x.value}};
      if (x.fde != kNoIndex) vj["fde"] = x.fde;
      if (x.fre != kNoIndex) vj["fre"] = x.fre;
      vs.push_back(std::move(vj));
    }
    cj["violations"] = std::move(vs);
    consumers.push_back(std::move(cj));
    if (rep.accepted()) {
      accept.push_back(name);
    } else {
      std::string ids;
      std::vector<std::string_view> seen;
      for (const auto& x : rep.violations) {
        const std::string_view id = rule_info(x.rule).id;
        if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
        if (seen.size() == 3) {
          ids += ", ...";
          break;
        }
        ids += (seen.empty() ? "" : ", ") + std::string(id);
        seen.push_back(id);
      }
      if (!rep.complete) ids += (ids.empty() ? "" : ", ") + std::string("not checked to the end (work bound)");
      reject.push_back(fmt::format("{} ({})", name, ids));
    }
    if (all && !reads) {
      // Said where the verdict is read: no version is read by all three
      // consumers, so `all` leaves out those that cannot read this one.
      std::string versions;
      for (Version w : {Version::kV1, Version::kV2, Version::kV3})
        if (reads_version(c, w)) versions += fmt::format("{}v{}", versions.empty() ? "" : " and ", static_cast<int>(w));
      out.text += fmt::format(
          "  {}: not checked: it reads SFrame {} only (--consumer all: the consumers that read v{})\n", name,
          versions.empty() ? std::string("no version") : versions, static_cast<int>(v));
    }
    if (!selected) continue;
    selected_reading += reads;
    if (rep.accepted()) {
      out.text += fmt::format("  {}: accepts the section (SFrame v{})\n", name, static_cast<int>(v));
    } else {
      out.failed = true;
      for (const auto& x : rep.violations) out.text += "  " + violation_text(x) + "\n";
      if (rep.omitted) out.text += fmt::format("  {}: {} more violations not shown\n", name, rep.omitted);
      if (!rep.complete) out.text += fmt::format("  {}: the walk stopped at its work bound\n", name);
      if (out.error.empty()) out.error = fmt::format("{} rejects the section", name);
    }
    if (!rep.file_rules_checked)
      out.text += fmt::format("  {}: rules needing the file skipped: {}\n", name, why_no_file);
  }
  if (all && selected_reading == 0) {
    out.failed = true;
    out.error = fmt::format("no consumer reads SFrame v{}", static_cast<int>(v));
    out.text += "  " + out.error + "\n";
  }
  // The summary line: which consumers would accept the section.
  std::string line = "  consumers: ";
  line += accept.empty() ? "none would accept" : "would accept: " + fmt::format("{}", fmt::join(accept, ", "));
  if (!reject.empty()) line += "; would reject: " + fmt::format("{}", fmt::join(reject, ", "));
  if (!facts) line += "; rules needing the file skipped: " + why_no_file;
  out.text = line + "\n" + out.text;
  return out;
}

// The DWARF half of `sframe verify` for one file: the verdict, and what the
// text and the JSON are printed from.
struct DwarfVerdict {
  // The comparison failed: rules disagree, the CFI could not be read on a
  // file that has it, or no PC was compared where both sides have some.
  bool failed = false;
  // "DWARF: N functions, M PCs, K mismatches" or "DWARF: not compared: REASON".
  std::string summary;
  // Text lines for after the verdict line: mismatches, missing ranges.
  std::string details;
  // Why it failed, in words (empty unless `failed`).
  std::string error;
  // The comparison, when one ran (else `reason` says why not), and the
  // file's symbols that name its functions.
  std::optional<cfi::Comparison> cmp;
  std::string reason;
  elf::SymbolTable syms;
};

// Compares `s` with the DWARF CFI of `file` (for a relocatable object: its
// ElfFile::relocated_copy()); `text`: also the lines of `details`.
DwarfVerdict verify_against_dwarf(const elf::ElfFile& file, const Section& s, bool text);

// The functions the DWARF CFI covers and the SFrame section does not
// (Comparison::missing): a file of many (a C++ program's cold clones) would
// bury the verdict under hundreds of lines of kilobyte-long demangled
// names, so without `verbose` a count, the first few and their names cut to
// one line's width.
std::string missing_text(const DwarfVerdict& d, bool verbose) {
  constexpr std::size_t kShown = 5;
  constexpr std::size_t kNameWidth = 100;
  if (!d.cmp) return {};
  const std::vector<cfi::Missing>& miss = d.cmp->missing;
  const bool all = verbose || miss.size() <= kShown;
  std::string out;
  if (!all)
    out = fmt::format("  not in SFrame: {} functions that the DWARF CFI covers (the first {} below; -v lists all)\n",
                      miss.size(), kShown);
  const std::string_view representable = cfi::describe(cfi::Reason::kNone);
  std::size_t n = 0;
  for (const cfi::Missing& m : miss) {
    if (!all && n++ == kShown) break;
    std::string name = where(d.syms, m.start);
    if (!verbose && name.size() > kNameWidth) name = name.substr(0, kNameWidth - 3) + "...";
    const std::string_view reason = cfi::describe(m.reason);
    out += fmt::format("{}{}-{} <{}>{}\n", all ? "  not in SFrame: " : "    ", hex(m.start), hex(m.end), name,
                       reason == representable ? "" : ": " + std::string(reason));
  }
  return out;
}

// The file's `dwarf` object (docs/json.md), one finding at a time.
void write_dwarf_json(JsonStream& js, const Section& s, const DwarfVerdict& d) {
  js.key("dwarf");
  js.begin_object();
  js.member("compared", d.cmp.has_value());
  if (!d.cmp) {
    js.member("reason", d.reason);
    js.end();
    return;
  }
  const cfi::Comparison& c = *d.cmp;
  js.member("functions_checked", c.functions_checked);
  js.member("pcs_checked", c.pcs_checked);
  js.key("mismatches");
  js.begin_array();
  for (const auto& m : c.mismatches) {
    js.begin_object();
    js.member("pc", hex(m.pc));
    js.member("function", where(d.syms, m.pc));
    js.member("what", m.what);
    js.member("sframe", rules_in_words(s, m.sframe));
    js.member("dwarf", rules_in_words(s, m.dwarf));
    js.end();
  }
  js.end();
  // `missing` gives every reason; `no_rules` none where none is known.
  const auto ranges = [&](std::string_view key, const std::vector<cfi::Missing>& list, bool none_as_empty) {
    js.key(key);
    js.begin_array();
    for (const auto& m : list) {
      js.begin_object();
      js.member("start", hex(m.start));
      js.member("end", hex(m.end));
      js.member("function", where(d.syms, m.start));
      js.member("reason", none_as_empty && m.reason == cfi::Reason::kNone ? std::string_view()
                                                                           : cfi::describe(m.reason));
      js.end();
    }
    js.end();
  };
  ranges("missing", c.missing, false);
  ranges("no_rules", c.no_rules, true);
  js.end();
}

class VerifyCommand final : public Command {
 public:
  std::string_view name() const override { return "verify"; }
  bool json() const override { return opt_.json; }

  void register_on(CLI::App& parent) override {
    app_ = parent.add_subcommand("verify", "Check every rule of the SFrame specification, then against DWARF CFI");
    app_->add_option("files", opt_.files, "ELF files, or raw sections as RAW[@ADDRESS]")->required();
    app_->add_option("--raw", opt_.raw, "Check this raw section (RAW[@ADDRESS]) instead of the file's own");
    app_->add_option("--section", opt_.section, "Name of the SFrame section")->capture_default_str();
    app_->add_option("--consumer", opt_.consumer,
                     "Also apply this consumer's acceptance rules (docs/consumers.md); a rejection fails the file. "
                     "all: every consumer that reads the section's version (v3: kernel, libsframe; v2: glibc, "
                     "libsframe; no version is read by all three)")
        ->check(CLI::IsMember({"kernel", "glibc", "libsframe", "all"}));
    app_->add_flag("-v,--verbose", verbose_,
                   "List every function not in SFrame, names in full (else a count and the first few)");
    app_->add_flag("--json", opt_.json, "Print JSON (schema: docs/json.md)");
  }

  int run() override {
    if (!opt_.raw.empty()) split_input(opt_.raw);  // a bad @ADDRESS is bad usage
    // Bad usage is found before the document begins (its own document, exit 2).
    if (opt_.json && opt_.raw.empty())
      for (const auto& path : opt_.files) split_input(path);
    return run_per_file("verify", opt_.files, opt_.json,
                        [&](const std::string& path, JsonStream* js) { return check_file(path, js); });
  }

 private:
  // Verifies one file and prints its verdict: as text, or as one element of
  // `files` to `js`. Returns its exit status (0 or 1).
  int check_file(const std::string& path, JsonStream* js) {
    std::string why;
    std::optional<Loaded> l;
    if (opt_.raw.empty()) {
      LoadOptions lo;
      lo.section = opt_.section;
      lo.strictness = Strictness::kStrict;
      lo.for_cfi = true;
      lo.allow_empty = true;
      l = load(path, lo, why);
    } else if (auto file = open_elf(path, true, why); file) {
      // The file need not have SFrame of its own (e.g. `gen` output for it).
      Loaded own;
      own.path = path;
      if (auto s = file->sframe_section(opt_.section)) own.data.address = s->address;
      own.file.emplace(std::move(*file));
      l.emplace(std::move(own));
      if (!use_raw(*l, opt_.raw, why)) l.reset();
    }
    if (!l) {
      if (js) {
        js->begin_object();
        js->member("file", path);
        js->member("ok", false);
        js->member("error", why);
        js->end();
      } else {
        complain(path, why);
      }
      return 1;
    }
    DwarfVerdict d;
    if (l->empty) {
      // No header, FDE or FRE to check, so no rule broken; and no SFrame
      // rule to hold against the CFI: every function is simply not in it.
      d.reason = fmt::format("section {} is empty (0 bytes): no SFrame data", l->data.name);
      if (js) {
        js->begin_object();
        js->member("file", path);
        js->member("ok", true);
        js->member("empty", true);
        js->member("num_fdes", 0);
        js->member("num_fres", 0);
        write_dwarf_json(*js, l->section, d);
        js->end();
      } else {
        fmt::print("{}: format ok; DWARF: not compared: {}\n", path, d.reason);
      }
      return 0;
    }
    // The semantic half: the same recovery rules as the file's DWARF CFI.
    // Its verdict comes first on the verdict line, so that line never says
    // "ok" about a file that fails.
    if (l->file) {
      d = verify_against_dwarf(*l->file, l->section, js == nullptr);
    } else {
      d.reason = "a raw section has no DWARF CFI (verify ELF --raw RAW@ADDRESS compares it)";
      d.summary = "DWARF: not compared: " + d.reason;
    }
    // Without --consumer only the summary line, which never fails the file.
    Json consumers;
    const ConsumerVerdict cv = check_consumers(*l, opt_.consumer, !opt_.raw.empty(), consumers);
    const bool consumer_failed = !opt_.consumer.empty() && cv.failed;
    if (js) {
      // The file's `error` follows the part that failed first: `dwarf`, or
      // else `consumers`.
      js->begin_object();
      js->member("file", path);
      js->member("ok", !d.failed && !consumer_failed);
      if (l->raw) js->member("raw", raw_json(*l));
      js->member("version", static_cast<int>(l->section.version()));
      js->member("num_fdes", l->section.num_fdes());
      js->member("num_fres", l->section.header().num_fres);
      write_dwarf_json(*js, l->section, d);
      if (d.failed) js->member("error", d.error);
      js->member("consumers", consumers);
      if (consumer_failed && !d.failed) js->member("error", cv.error);
      js->end();
    } else {
      fmt::print("{}: {}; {}\n", path, d.failed || consumer_failed ? "FAILED: format valid" : "format ok",
                 d.summary);
      fmt::print("  {}: SFrame v{}, {} FDEs, {} FREs{}\n", l->data.name, static_cast<int>(l->section.version()),
                 l->section.num_fdes(), l->section.header().num_fres, l->raw ? "; " + raw_note(*l) : "");
      print(d.details);
      print(missing_text(d, verbose_));
      print(cv.text);
      if (d.failed) complain(path, d.error);
      if (consumer_failed) complain(path, cv.error);
    }
    return d.failed || consumer_failed ? 1 : 0;
  }

  VerifyOptions opt_;
  bool verbose_ = false;
};

}  // namespace

std::unique_ptr<Command> make_verify_command() { return std::make_unique<VerifyCommand>(); }

namespace {

DwarfVerdict verify_against_dwarf(const elf::ElfFile& file, const Section& s, bool text) {
  DwarfVerdict v;
  // Not comparing is acceptable only where there is nothing to compare
  // with; a comparison that cannot run on a file with CFI is a failure.
  const auto not_compared = [&](const std::string& reason, bool failure) {
    v.summary = "DWARF: not compared: " + reason;
    v.failed = failure;
    if (failure) v.error = "DWARF CFI not compared: " + reason;
    v.reason = reason;
    return v;
  };
  if (!cfi::abi_of(file.info()))
    return not_compared(fmt::format("no SFrame ABI for ELF machine {}", file.info().machine), false);
  const auto eh = file.section_bytes(".eh_frame");
  const auto debug = file.section_bytes(".debug_frame");
  if ((!eh || eh->bytes.size() <= 4) && (!debug || debug->bytes.size() <= 4))  // 4 bytes: only the terminator
    return not_compared("no .eh_frame FDEs and no .debug_frame", false);
  auto cmp = cfi::compare(file, s);
  if (!cmp) {
    const std::string why =
        cmp.error().code() == ElfErrc::kElfError && !file.relocated() ? why_no_cfi(file) : std::string();
    return not_compared("cannot read the DWARF CFI: " + (why.empty() ? error_text(cmp.error()) : why), true);
  }
  if (!cmp->libdw_run)
    return not_compared(fmt::format("CFI on which libdw could allocate without bound, so libdw was not run: {} rules "
                                    "for register numbers of 2^16 or more, {} LEB128s of more than 10 bytes, {} FDEs "
                                    "cut short, {} unreadable FDEs",
                                    cmp->large_regno, cmp->long_leb, cmp->truncated_fdes, cmp->ours_unreadable),
                        true);
  v.syms = elf::SymbolTable::read(file);
  const elf::SymbolTable& syms = v.syms;
  // The text's lines (the JSON is written from the comparison itself).
  for (const auto& m : cmp->mismatches) {
    if (!text) break;
    v.details += fmt::format("  mismatch at 0x{:x} <{}>: {} differs\n    SFrame: {}\n    DWARF:  {}\n", m.pc,
                             where(syms, m.pc), m.what, rules_in_words(s, m.sframe), rules_in_words(s, m.dwarf));
  }
  for (const auto& m : cmp->no_rules) {
    if (!text) break;
    const std::string why = m.reason == cfi::Reason::kNone ? std::string() : std::string(cfi::describe(m.reason));
    v.details += fmt::format(
        "  no SFrame rules: 0x{:x}-0x{:x} <{}>: a signal-frame FDE without FREs (an outermost frame, SFrame v3 "
        "§1.2), where DWARF CFI recovers the caller{}\n",
        m.start, m.end, where(syms, m.start), why.empty() ? "" : " (" + why + ")");
  }
  v.summary = fmt::format("DWARF: {} functions, {} PCs, {} mismatch{}", cmp->functions_checked, cmp->pcs_checked,
                          cmp->mismatches.size(), cmp->mismatches.size() == 1 ? "" : "es");
  if (!cmp->mismatches.empty()) {
    v.failed = true;
    v.error = "SFrame and DWARF CFI disagree";
  } else if (cmp->unreadable_fdes != 0) {
    // Part of the CFI was never compared: not a verdict on the whole file.
    v.failed = true;
    v.error = fmt::format("libdw could not read {} FDEs of the DWARF CFI", cmp->unreadable_fdes);
    if (cmp->cie_restore != 0)
      v.error += fmt::format(" (the CFI has {} DW_CFA_restore in CIE initial instructions, which libdw refuses; DWARF "
                             "5 §6.4.2.3 makes them no change)",
                             cmp->cie_restore);
    v.details += "  " + v.error + "\n";
  } else if (cmp->pcs_checked == 0 && cmp->no_rules_pcs == 0 && cmp->functions_checked > 0 && s.num_fdes() > 0) {
    // Both sides describe code, yet at no common PC: the section was read
    // at the wrong address (e.g. a raw section given @ another address).
    v.failed = true;
    v.error = "no PC of the DWARF CFI is in the SFrame section (wrong section address?)";
    v.details += "  " + v.error + "\n";
  }
  v.cmp.emplace(std::move(*cmp));
  return v;
}

}  // namespace

}  // namespace sframe::tools
