// SPDX-License-Identifier: MIT
// What every subcommand of the `sframe` tool shares: the JSON envelope, the
// one number parser, opening an input (an ELF file, or a raw section written
// by `gen -o`/`merge -o`, as FILE[@ADDRESS]), and the one-line complaints.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "render.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/section.hpp"

namespace sframe::tools {

/// JSON documents carry this version; docs/json.md describes the schema.
inline constexpr int kJsonVersion = 1;

/// `{"sframepp_json": 1, "command": COMMAND}`: every JSON document starts so.
Json envelope(std::string_view command);

class JsonStream;
/// Writes one JSON document to stdout as it is produced (docs/json.md): the
/// envelope of `command`, then the members `body` writes into the top
/// object, then closes it; returns `body`'s exit status. An exception out
/// of `body`, after any number of bytes, is said on stderr ("sframe: WHERE:
/// WHY") and closes the document with `"error"` as its last member: exit
/// status 1. Bad usage (UsageError) belongs before the first byte: the
/// caller checks what can be bad before calling this.
int stream_document(std::string_view command, const std::string& where, const std::function<int(JsonStream&)>& body);
/// Runs `one` on each of `files` in turn, combining their exit statuses (0
/// or 1): with `json`, in one streamed document (stream_document) whose
/// `files` array gets one element from each call; else `one` prints text
/// (and is given no stream).
int run_per_file(std::string_view command, const std::vector<std::string>& files, bool json,
                 const std::function<int(const std::string&, JsonStream*)>& one);

/// Bad usage (a bad number, a bad option value): `main` prints "sframe:
/// COMMAND: what" (and the JSON error document with --json), exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The one parser of PCs, addresses and other numbers given on the command
/// line: hex as 0x..., or decimal. Refused, with the reason in `why`: a
/// sign ("-5"), a leading 0 ("010": octal or decimal?), hex digits without
/// 0x ("148f2", as perf prints them: "write 0x148f2"), more than 64 bits.
std::optional<std::uint64_t> parse_number(std::string_view text, std::string& why);
/// parse_number, throwing UsageError("WHAT TEXT: why") on refusal.
std::uint64_t parse_number_or_throw(std::string_view text, std::string_view what);

/// `--optimize-size` and `--for CONSUMERS` of gen, convert and merge.
struct SizeFlags {
  bool optimize = false;
  /// Comma list of kernel, glibc, libsframe; empty: every consumer that
  /// reads the version written.
  std::string consumers;
};
/// Help of the two options, the same for every command.
inline constexpr const char* kOptimizeSizeHelp =
    "Write a smaller section: merge adjacent FDEs (with identical rows, or different ones when that is smaller), "
    "PC-mask FDEs for repeated stubs, share identical FRE blocks, where every --for consumer accepts it "
    "(docs/consumers.md)";
inline constexpr const char* kForHelp =
    "With --optimize-size: the consumers that must accept the section, comma separated (kernel, glibc, "
    "libsframe; default: all that read the version written)";
/// The encoder's size options for a section of version `v` in byte order
/// `big_endian` (size_options_for, docs/consumers.md "Smaller sections"):
/// none without --optimize-size. Throws UsageError for an unknown consumer
/// or one that does not read `v`.
SizeOptions size_options(const SizeFlags& flags, Version v, bool big_endian);

/// Why elf::plan_loadable_section() refused, in words (gen and convert
/// check the common reasons before: 32-bit, not linked, no PT_LOAD).
std::string cannot_add_segment(const Error& e);

/// Warns on stderr ("sframe: CMD: warning: OUT: ...") when `plan` moves the
/// program-header table to the new segment (LoadablePlan::table_in_place
/// false): a layout strip, objcopy and eu-strip do not keep, so the file
/// must be stripped before, not after (docs/loadable.md). Nothing otherwise.
void warn_if_not_strip_safe(std::string_view cmd, const std::string& out, const elf::LoadablePlan& plan);

/// The sframe binary itself (/proc/self/exe resolved): what dump, stat and
/// lookup read when given no FILE.
std::string self_path();

/// Prints `text` on stdout as it is.
void print(const std::string& text);
/// "sframe: WHERE: WHY" on stderr (stdout flushed first, to keep the order).
void complain(const std::string& where, const std::string& why);

/// An input as given on the command line: PATH or PATH@ADDRESS.
struct InputName {
  std::string path;
  std::optional<std::uint64_t> address;  // given after '@'
};
/// Splits ARG at its last '@' unless ARG names an existing file; a bad
/// address throws UsageError.
InputName split_input(const std::string& arg);

/// What a file's first bytes say it is.
enum class FileKind { kElf, kRaw };
/// Checks `path` as objdump does before reading it: "is a directory", the
/// system's words for an errno ("No such file or directory"), "file format
/// not recognized" (empty, or neither ELF nor SFrame magic), "file
/// truncated" (ELF headers past its end), "32-bit x86 has no SFrame ABI".
std::optional<FileKind> identify(const std::string& path, std::string& why);

/// Reads a whole file; nullopt on failure (`why`: the system's words).
std::optional<std::vector<std::byte>> read_all(const std::string& path, std::string& why);

/// An input with its SFrame section parsed (and checked to the level asked).
struct Loaded {
  std::string path;
  std::optional<elf::ElfFile> file;  // none for a raw section
  elf::SFrameSectionData data;
  Section section;
  bool raw = false;
  bool address_given = false;  // @ADDRESS given (a raw section is at 0 otherwise)
  /// The ELF file's SFrame section has no bytes (size 0): a section without
  /// data, as GNU as 2.45 writes when it leaves out every FDE of an input
  /// (Ubuntu 25.10's Scrt1.o); objdump prints no SFrame for it and ld links
  /// it. `section` is then not parsed (only with LoadOptions::allow_empty).
  bool empty = false;
};

struct LoadOptions {
  std::string section = ".sframe";
  Strictness strictness = Strictness::kLenient;
  /// A relocatable object is opened as its relocated copy (verify).
  bool for_cfi = false;
  /// Receives what objdump prints before the section (or before failing).
  std::string* text_prefix = nullptr;
  /// An empty SFrame section (size 0) loads as Loaded::empty; otherwise it
  /// is an error ("section NAME is empty (0 bytes): no SFrame data").
  bool allow_empty = false;
};

/// What `dump` prints for an empty section, after the file's banner: the
/// words of binutils' readelf --sframe (objdump 2.47 prints "Can't get
/// contents for section ''." there, naming no section).
std::string empty_section_text(const std::string& section);

/// "section NAME: ERROR" ("raw section: ERROR") for an error found in `l`'s
/// SFrame section (`section`: its name in an ELF file); for an ELF file the
/// file offset of the byte at fault (the section's sh_offset, or its
/// PT_GNU_SFRAME's p_offset, plus the error's section offset) follows.
std::string section_error_text(const Loaded& l, const std::string& section, const Error& e);

/// Whether to_spec() may expand `l`'s section: false (the reason in `why`)
/// when its FDEs declare more rows than 4 per byte of the section, which
/// only FDEs sharing FRE blocks can (spec §2.4).
bool rows_fit_model(const Loaded& l, const std::string& section, std::string& why);

/// Opens ARG (PATH[@ADDRESS]; ELF or raw, told apart by their magic) and
/// parses its SFrame section, placed at ADDRESS when given.
std::optional<Loaded> load(const std::string& arg, const LoadOptions& opt, std::string& why);

/// Opens an ELF file; a relocatable object as its relocated copy (whose CFI
/// and SFrame sit at the same addresses) when `for_cfi`.
std::optional<elf::ElfFile> open_elf(const std::string& path, bool for_cfi, std::string& why);

/// "raw SFrame section at 0x0 (no @ADDRESS given: address 0 assumed)".
std::string raw_note(const Loaded& l);
/// {"address": "0x...", "address_given": bool} for the "raw" JSON field.
Json raw_json(const Loaded& l);

}  // namespace sframe::tools
