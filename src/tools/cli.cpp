// SPDX-License-Identifier: MIT
#include "cli.hpp"

#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "commands.hpp"
#include "json_stream.hpp"
#include "objdump_text.hpp"

namespace sframe::tools {

Json envelope(std::string_view command) {
  Json j;
  j["sframepp_json"] = kJsonVersion;
  j["command"] = std::string(command);
  return j;
}

int stream_document(std::string_view command, const std::string& where, const std::function<int(JsonStream&)>& body) {
  JsonStream doc;
  try {
    doc.begin_object();
    const Json head = envelope(command);
    for (const auto& [k, v] : head.items()) doc.member(k, v);
    const int rc = body(doc);
    doc.finish();
    return rc;
  } catch (const std::exception& e) {
    // Past the first byte there is no second document to print: the error
    // closes this one, as its last member.
    complain(where, e.what());
    doc.close_with_error(e.what());
    return 1;
  }
}

int run_per_file(std::string_view command, const std::vector<std::string>& files, bool json,
                 const std::function<int(const std::string&, JsonStream*)>& one) {
  if (!json) {
    int rc = 0;
    for (const auto& path : files) rc |= one(path, nullptr);
    return rc;
  }
  return stream_document(command, files.empty() ? std::string(command) : files.front(), [&](JsonStream& js) {
    int rc = 0;
    js.key("files");
    js.begin_array();
    for (const auto& path : files) rc |= one(path, &js);
    js.end();
    return rc;
  });
}

std::optional<std::uint64_t> parse_number(std::string_view text, std::string& why) {
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  const auto hex_value = [&](char c) -> int {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const std::string t(text);
  if (text.empty()) {
    why = "empty number";
    return std::nullopt;
  }
  if (text[0] == '-' || text[0] == '+') {
    why = fmt::format("{}: signed numbers are refused (write 0x... or a decimal number)", t);
    return std::nullopt;
  }
  std::uint64_t v = 0;
  if (text.size() > 1 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    const std::string_view digits = text.substr(2);
    bool ok = !digits.empty();
    for (char c : digits) ok = ok && hex_value(c) >= 0;
    if (!ok) {
      why = fmt::format("{}: not a hex number", t);
      return std::nullopt;
    }
    for (char c : digits) {
      if (v >> 60) {
        why = fmt::format("{}: more than 64 bits", t);
        return std::nullopt;
      }
      v = v << 4 | static_cast<std::uint64_t>(hex_value(c));
    }
    return v;
  }
  bool decimal = true, hexish = true;
  for (char c : text) {
    decimal = decimal && is_digit(c);
    hexish = hexish && hex_value(c) >= 0;
  }
  if (!decimal) {
    why = hexish ? fmt::format("{}: hex digits without 0x; write 0x{}", t, t) : fmt::format("{}: not a number", t);
    return std::nullopt;
  }
  if (text.size() > 1 && text[0] == '0') {
    const std::string_view rest = text.substr(std::min(text.find_first_not_of('0'), text.size() - 1));
    why = fmt::format("{}: a leading 0 is refused (octal or decimal?); write 0x{} or {}", t, rest, rest);
    return std::nullopt;
  }
  for (char c : text) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) {
      why = fmt::format("{}: more than 64 bits", t);
      return std::nullopt;
    }
    v = v * 10 + d;
  }
  return v;
}

std::uint64_t parse_number_or_throw(std::string_view text, std::string_view what) {
  std::string why;
  const auto v = parse_number(text, why);
  if (!v) throw UsageError(fmt::format("{} {}", what, why));
  return *v;
}

std::string cannot_add_segment(const Error& e) {
  if (e.code() == EncodeErrc::kNotRepresentable)
    return fmt::format("cannot add a segment: it would start {} bytes past the end of the file (the gap up to the "
                       "highest segment's end, written as zeros; at most {})",
                       e.value, elf::kMaxGap);
  return fmt::format("cannot add a segment: {}", error_text(e));
}

void warn_if_not_strip_safe(std::string_view cmd, const std::string& out, const elf::LoadablePlan& plan) {
  if (plan.table_in_place) return;
  fmt::print(stderr,
             "sframe: {}: warning: {}: the program headers cannot grow in place ({}), so they moved to the new "
             "segment: strip, objcopy and eu-strip do not keep that layout (the stripped program crashes); strip "
             "first, then run sframe\n",
             cmd, out, plan.no_room);
}

SizeOptions size_options(const SizeFlags& flags, Version v, bool big_endian) {
  if (!flags.optimize) return {};
  std::vector<Consumer> chosen;
  if (flags.consumers.empty()) {
    for (Consumer c : kAllConsumers)
      if (reads_version(c, v)) chosen.push_back(c);
  } else {
    std::string_view rest = flags.consumers;
    while (true) {
      const std::size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      const auto c = consumer_from_name(name);
      if (!c) throw UsageError(fmt::format("--for: unknown consumer '{}' (kernel, glibc, libsframe)", name));
      if (!reads_version(*c, v))
        throw UsageError(fmt::format("--for: {} does not read SFrame v{} (docs/consumers.md)", name,
                                     static_cast<int>(v)));
      chosen.push_back(*c);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return size_options_for(chosen, v, big_endian);
}

void print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

void complain(const std::string& where, const std::string& why) {
  std::fflush(stdout);
  fmt::print(stderr, "sframe: {}: {}\n", where, why);
}

InputName split_input(const std::string& arg) {
  const auto at = arg.rfind('@');
  struct stat st {};
  if (at == std::string::npos || ::stat(arg.c_str(), &st) == 0) return {arg, std::nullopt};
  return {arg.substr(0, at), parse_number_or_throw(arg.substr(at + 1), fmt::format("{}: address after @:", arg))};
}

namespace {

std::uint64_t get(const unsigned char* p, int n, bool big) {
  return endian::load(reinterpret_cast<const std::byte*>(p), static_cast<unsigned>(n), endian::order(big));
}

// ELF headers that point past the end of the file: "file truncated".
bool elf_truncated(const unsigned char* h, std::size_t n, std::uint64_t size) {
  const bool is64 = h[EI_CLASS] == ELFCLASS64, big = h[EI_DATA] == ELFDATA2MSB;
  const std::size_t ehsize = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
  if (n < ehsize) return true;
  const std::uint64_t phoff = is64 ? get(h + 32, 8, big) : get(h + 28, 4, big);
  const std::uint64_t shoff = is64 ? get(h + 40, 8, big) : get(h + 32, 4, big);
  const std::uint64_t phent = get(h + (is64 ? 54 : 42), 2, big), phnum = get(h + (is64 ? 56 : 44), 2, big);
  const std::uint64_t shent = get(h + (is64 ? 58 : 46), 2, big), shnum = get(h + (is64 ? 60 : 48), 2, big);
  const auto past = [&](std::uint64_t off, std::uint64_t len) { return off > size || len > size - off; };
  return (phnum && past(phoff, phent * phnum)) || (shnum && past(shoff, shent * shnum));
}

}  // namespace

std::optional<FileKind> identify(const std::string& path, std::string& why) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    why = "is a directory";
    return std::nullopt;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  unsigned char h[sizeof(Elf64_Ehdr)] = {};
  ssize_t n = 0;
  while (n < static_cast<ssize_t>(sizeof h)) {
    const ssize_t r = ::read(fd, h + n, sizeof h - static_cast<std::size_t>(n));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      why = std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (r == 0) break;
    n += r;
  }
  ::close(fd);
  const auto got = static_cast<std::size_t>(n);
  if (got >= 4 && ((h[0] == 0xe2 && h[1] == 0xde) || (h[0] == 0xde && h[1] == 0xe2))) return FileKind::kRaw;
  if (got >= SELFMAG && std::memcmp(h, ELFMAG, SELFMAG) == 0) {
    if (got <= EI_DATA || elf_truncated(h, got, static_cast<std::uint64_t>(st.st_size))) {
      why = "file truncated";
      return std::nullopt;
    }
    return FileKind::kElf;
  }
  why = "file format not recognized";
  return std::nullopt;
}

std::optional<std::vector<std::byte>> read_all(const std::string& path, std::string& why) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  std::vector<std::byte> out;
  std::byte buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  const bool ok = !std::ferror(f);
  if (!ok) why = std::strerror(errno);
  std::fclose(f);
  if (!ok) return std::nullopt;
  return out;
}

std::optional<elf::ElfFile> open_elf(const std::string& path, bool for_cfi, std::string& why) {
  if (!identify(path, why)) return std::nullopt;
  auto file = elf::ElfFile::open(path);
  if (!file) {
    why = write_error_text(file.error());
    return std::nullopt;
  }
  if (!for_cfi || file->info().type != ET_REL) return std::move(*file);
  auto copy = file->relocated_copy();
  if (!copy) {
    why = "cannot apply the relocations of .eh_frame and .sframe: " + error_text(copy.error());
    return std::nullopt;
  }
  return std::move(*copy);
}

namespace {

// The file offset of an ELF input's SFrame section (its section header's,
// else its PT_GNU_SFRAME's); none for a raw section, whose offsets are
// already file offsets.
std::optional<std::uint64_t> section_file_offset(const Loaded& l, const std::string& section) {
  if (l.raw || !l.file) return std::nullopt;
  if (l.data.from_segment) {
    for (const elf::ProgramHeader& p : l.file->program_headers())
      if (p.type == elf::kPtGnuSframeSegment) return p.offset;
    return std::nullopt;
  }
  const auto sec = l.file->section_bytes(section);
  if (!sec) return std::nullopt;
  return sec->header.offset;
}

}  // namespace

std::string section_error_text(const Loaded& l, const std::string& section, const Error& e) {
  std::string s = fmt::format("{}: {}", l.raw ? std::string("raw section") : "section " + section, error_text(e));
  // Error offsets count from the section's first byte (every offset of the
  // format is section-relative, spec §2); the file offset of the byte at
  // fault is what a hex editor or `readelf -x` shows, so say it too.
  if (const auto base = section_file_offset(l, section)) s += fmt::format(", file offset 0x{:x}", *base + e.offset);
  return s;
}

bool rows_fit_model(const Loaded& l, const std::string& section, std::string& why) {
  // FDEs may share one FRE block (spec §2.4 does not forbid it), so the rows
  // they declare can outnumber the section's bytes without bound: 20,000
  // FDEs on one block of 100,000 FREs (700 KB) declare 2 x 10^9 rows, which
  // to_spec() would hold apart. Blocks that are not shared take 2 bytes or
  // more per row; sharing gets 4 rows per byte of headroom.
  const std::uint64_t limit = 4 * std::uint64_t{l.data.bytes.size()} + 4096;
  std::uint64_t rows = 0;
  for (std::uint32_t i = 0; i < l.section.num_fdes(); ++i) {
    const Expected<Fde> f = l.section.fde(i);
    if (!f) {
      why = section_error_text(l, section, f.error());
      return false;
    }
    rows += f->num_fres;
    if (rows > limit) {
      why = fmt::format("{}: FDEs sharing FRE blocks declare more than {} rows by FDE {} ({} bytes); merge and "
                        "convert hold every FDE's rows apart, up to 4 per byte",
                        l.raw ? std::string("raw section") : "section " + section, limit, i, l.data.bytes.size());
      return false;
    }
  }
  return true;
}

std::optional<Loaded> load(const std::string& arg, const LoadOptions& opt, std::string& why) {
  const InputName in = split_input(arg);
  const auto kind = identify(in.path, why);
  if (!kind) return std::nullopt;
  Loaded l;
  l.path = in.path;
  l.address_given = in.address.has_value();
  if (*kind == FileKind::kRaw) {
    auto bytes = read_all(in.path, why);
    if (!bytes) return std::nullopt;
    l.raw = true;
    l.data.owned = std::move(*bytes);
    l.data.bytes = l.data.owned;
    l.data.address = in.address.value_or(0);
    l.data.name = in.path;
    if (opt.text_prefix)
      *opt.text_prefix += fmt::format("\n{}:     {}\n\n", in.path, raw_note(l));
  } else {
    auto file = open_elf(in.path, opt.for_cfi, why);
    if (!file) return std::nullopt;
    l.file.emplace(std::move(*file));
    if (opt.text_prefix) append_banner(*opt.text_prefix, in.path, bfd_target_name(l.file->info()));
    auto data = l.file->sframe_section(opt.section);
    if (!data) {
      if (data.error().code() == ElfErrc::kNoSFrameSection) {
        if (opt.text_prefix) *opt.text_prefix += fmt::format("No {} section present\n\n", opt.section);
        why = l.file->info().machine == EM_386 ? fmt::format("no section {}: 32-bit x86 has no SFrame ABI", opt.section)
                                               : fmt::format("no section {}", opt.section);
      } else {
        why = error_text(data.error());
      }
      return std::nullopt;
    }
    l.data = std::move(*data);
    if (in.address) l.data.address = *in.address;
    if (l.data.bytes.empty()) {
      // No SFrame header to read: a section without data, not a damaged one.
      if (opt.allow_empty) {
        l.empty = true;
        return l;
      }
      why = fmt::format("section {} is empty (0 bytes): no SFrame data", opt.section);
      return std::nullopt;
    }
  }
  auto sec = Section::parse(l.data.bytes, l.data.address);
  if (!sec) {
    why = section_error_text(l, opt.section, sec.error());
    return std::nullopt;
  }
  if (auto ok = validate(*sec, opt.strictness); !ok) {
    why = section_error_text(l, opt.section, ok.error());
    return std::nullopt;
  }
  l.section = *sec;
  return l;
}

std::string empty_section_text(const std::string& section) {
  return fmt::format("\nSection '{}' has no debugging data.\n", section);
}

std::string raw_note(const Loaded& l) {
  return fmt::format("raw SFrame section at 0x{:x}{}", l.data.address,
                     l.address_given ? "" : " (no @ADDRESS given: address 0 assumed)");
}

Json raw_json(const Loaded& l) { return {{"address", hex(l.data.address)}, {"address_given", l.address_given}}; }

}  // namespace sframe::tools

namespace sframe::tools {
Command::~Command() = default;
std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("/proc/self/exe");
}

}  // namespace sframe::tools
