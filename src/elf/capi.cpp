// SPDX-License-Identifier: MIT
// The C API of libsframepp (include/sframe/elf/sframe_elf.h): sections from bytes
// or ELF files, validation, FDE/FRE iteration, find(pc),
// the encoder and the unwinder, as thin wrappers over the C++ API. Each
// entry point checks its pointers, maps C++ errors to sframe_status
// (capi_internal.hpp) and catches every exception. sframe_strerror and
// sframe_free, which every library's C functions share, are in
// libsframepp-format (src/format/capi_common.cpp).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <optional>
#include <string>
#include <vector>

#include "../capi/capi_internal.hpp"
#include "sframe/elf/elf.hpp"
#include "sframe/format/encode.hpp"
#include "sframe/format/lookup.hpp"
#include "sframe/format/section.hpp"
#include "sframe/unwind/unwind.hpp"

using namespace sframe;
using sframe::capi::fail;
using sframe::capi::guarded;

// The handles behind the opaque C types.
struct sframe_section {
  Section section;
  /// The copied bytes (sframe_section_open_bytes without NO_COPY).
  std::vector<std::byte> copy;
  /// The ELF file whose mapping (or relocated copy) the section views.
  std::optional<elf::ElfFile> file;
  std::optional<elf::SFrameSectionData> data;
};

struct sframe_encoder {
  SectionEncoder encoder;
};

struct sframe_unwinder {
  std::vector<Module> storage;
  ModuleMap map;
  explicit sframe_unwinder(std::size_t n) : storage(n), map(std::span<Module>(storage)) {}
};

namespace {

// The C layouts are ABI: their sizes are stated in sframe.h.
static_assert(sizeof(sframe_error) == 32 && sizeof(sframe_rule) == 12 && sizeof(sframe_row) == 40);
static_assert(sizeof(sframe_fde) == 40 && sizeof(sframe_fre) == 64 && sizeof(sframe_section_info) == 48);
static_assert(sizeof(sframe_encoder_header) == 24 && sizeof(sframe_function) == 24 &&
              sizeof(sframe_row_spec) == 44);
static_assert(sizeof(sframe_regs) == 272 && sizeof(sframe_frame) == 48 && sizeof(sframe_unwind_result) == 24);
static_assert(sizeof(sframe_generate_stats) == 32 && sizeof(sframe_backtrace_result) == 24);
// The unwinder's stop reasons, frame flags and architectures pass through
// unchanged: the C values are those of the C++ enums.
static_assert(static_cast<int>(StopReason::kOutermost) == SFRAME_STOP_OUTERMOST &&
              static_cast<int>(StopReason::kNoSFrameForPc) == SFRAME_STOP_NO_SFRAME_FOR_PC &&
              static_cast<int>(StopReason::kCfaNotIncreasing) == SFRAME_STOP_CFA_NOT_INCREASING &&
              static_cast<int>(StopReason::kUnreadableMemory) == SFRAME_STOP_UNREADABLE_MEMORY &&
              static_cast<int>(StopReason::kDepthLimit) == SFRAME_STOP_DEPTH_LIMIT &&
              static_cast<int>(StopReason::kBadRule) == SFRAME_STOP_BAD_RULE &&
              static_cast<int>(StopReason::kZeroPc) == SFRAME_STOP_ZERO_PC &&
              static_cast<int>(StopReason::kNotInitialized) == SFRAME_STOP_NOT_INITIALIZED &&
              static_cast<int>(StopReason::kUnsupported) == SFRAME_STOP_UNSUPPORTED &&
              static_cast<int>(StopReason::kReadCheckRefused) == SFRAME_STOP_READ_CHECK_REFUSED);
static_assert(int{kFrameSignal} == int{SFRAME_FRAME_SIGNAL} && int{kFrameFpFallback} == int{SFRAME_FRAME_FP_FALLBACK} &&
              int{kFramePauthStripped} == int{SFRAME_FRAME_PAUTH_STRIPPED} &&
              int{kFrameFpValid} == int{SFRAME_FRAME_FP_VALID});
static_assert(static_cast<int>(Arch::kAmd64) == SFRAME_ARCH_AMD64 &&
              static_cast<int>(Arch::kAarch64) == SFRAME_ARCH_AARCH64 &&
              static_cast<int>(Arch::kS390x) == SFRAME_ARCH_S390X);

sframe_rule to_c(const Rule& r) noexcept {
  sframe_rule c{};
  switch (r.kind) {
    case Rule::Kind::kUnchanged: c.kind = SFRAME_RULE_UNCHANGED; break;
    case Rule::Kind::kUndefined: c.kind = SFRAME_RULE_UNDEFINED; break;
    case Rule::Kind::kExpr: c.kind = SFRAME_RULE_EXPR; break;
  }
  c.base = r.base == Rule::Base::kRegister ? SFRAME_BASE_REGISTER : SFRAME_BASE_CFA;
  c.flags = static_cast<std::uint8_t>(r.deref ? SFRAME_RULE_DEREF : 0);
  c.regnum = r.regnum;
  c.offset = r.offset;
  return c;
}

// A resolved RA/FP rule with the raw view's flags: SFRAME_RULE_PADDING for a
// padding word, SFRAME_RULE_FROM_HEADER where no word was stored and the
// header's fixed offset gave the rule.
sframe_rule to_c(const Rule& r, WireRow::Slot slot, std::int8_t fixed) noexcept {
  sframe_rule c = to_c(r);
  if (slot == WireRow::Slot::kPadding) c.flags |= SFRAME_RULE_PADDING;
  if (slot != WireRow::Slot::kWord && fixed != 0 && r.kind == Rule::Kind::kExpr) c.flags |= SFRAME_RULE_FROM_HEADER;
  return c;
}

sframe_row row_to_c(const Section& s, const WireRow& w, const FrameRow& row) noexcept {
  sframe_row c{};
  c.cfa = to_c(row.cfa);
  c.ra = to_c(row.ra, w.ra, s.header().cfa_fixed_ra_offset);
  c.fp = to_c(row.fp, w.fp, s.header().cfa_fixed_fp_offset);
  c.ra_mangled = row.ra_mangled;
  return c;
}

sframe_fde to_c(const Fde& f) noexcept {
  sframe_fde c{};
  c.index = f.index;
  c.size = f.size;
  c.start_pc = f.start_pc;
  c.num_fres = f.num_fres;
  c.fre_offset = f.fre_offset;
  c.fre_type = static_cast<std::uint8_t>(f.fre_type);
  c.pc_type = static_cast<std::uint8_t>(f.pc_type);
  c.fde_type = static_cast<std::uint8_t>(f.fde_type);
  c.pauth_key = static_cast<std::uint8_t>(f.pauth_key);
  c.signal = f.signal;
  c.rep_size = f.rep_size;
  c.info = f.info;
  c.info2 = f.info2;
  return c;
}

sframe_fre to_c(const Section& s, const WireRow& w, const FrameRow& row) noexcept {
  const Fre& f = w.fre;
  sframe_fre c{};
  c.index = f.index;
  c.start_offset = f.start_offset;
  c.section_offset = f.section_offset;
  c.encoded_size = f.encoded_size;
  c.info = f.info;
  c.dataword_count = f.dataword_count;
  c.dataword_size = f.dataword_size;
  c.cfa_base_sp = f.cfa_base_sp();
  c.row = row_to_c(s, w, row);
  return c;
}

// C rules to the model the encoder takes (the inverse of to_c).
Rule from_c(const sframe_rule& c) noexcept {
  Rule r;
  r.kind = c.kind == SFRAME_RULE_EXPR        ? Rule::Kind::kExpr
           : c.kind == SFRAME_RULE_UNDEFINED ? Rule::Kind::kUndefined
                                             : Rule::Kind::kUnchanged;
  // SFRAME_RULE_FROM_HEADER and SFRAME_RULE_PADDING say how a rule was
  // stored; the encoder stores a rule equal to the header's fixed offset as
  // no word, and writes a padding word where an FP word needs one before it.
  r.base = c.base == SFRAME_BASE_REGISTER ? Rule::Base::kRegister : Rule::Base::kCfa;
  r.deref = (c.flags & SFRAME_RULE_DEREF) != 0;
  r.regnum = c.regnum;
  r.offset = c.offset;
  return r;
}

bool valid_rule(const sframe_rule& c) noexcept {
  return c.kind <= SFRAME_RULE_EXPR && c.base <= SFRAME_BASE_REGISTER &&
         (c.flags & ~(SFRAME_RULE_DEREF | SFRAME_RULE_FROM_HEADER | SFRAME_RULE_PADDING)) == 0;
}

FrameRow from_c(const sframe_row& c) noexcept {
  FrameRow row;
  row.cfa = from_c(c.cfa);
  row.ra = from_c(c.ra);
  row.fp = from_c(c.fp);
  row.ra_mangled = c.ra_mangled != 0;
  if (c.ra.kind == SFRAME_RULE_UNDEFINED) {
    row.cfa = Rule{Rule::Kind::kUndefined};
    row.ra = Rule{Rule::Kind::kUndefined};
    row.fp = Rule{};
  }
  return row;
}

// Memory through the caller's callback (the unwinder's MemoryReader).
struct CallbackMemory {
  sframe_read_word_fn fn;
  void* context;
  std::optional<std::uint64_t> read_word(std::uint64_t addr) const noexcept {
    std::uint64_t v = 0;
    if (fn(context, addr, &v) == 0) return std::nullopt;
    return v;
  }
};
static_assert(MemoryReader<CallbackMemory>);

}  // namespace

extern "C" {

sframe_status sframe_section_open_bytes(const void* bytes, size_t size, uint64_t address, uint32_t flags,
                                        sframe_section** out, sframe_error* err) {
  return guarded(err, [&] {
    if (!out || (!bytes && size > 0) || (flags & ~std::uint32_t{SFRAME_OPEN_NO_COPY}))
      return fail(SFRAME_E_INVALID_ARGUMENT, err);
    *out = nullptr;
    auto h = std::make_unique<sframe_section>();
    std::span<const std::byte> view(static_cast<const std::byte*>(bytes), size);
    if (!(flags & SFRAME_OPEN_NO_COPY)) {
      h->copy.assign(view.begin(), view.end());
      view = h->copy;
    }
    auto s = Section::parse(view, address);
    if (!s) return fail(s.error(), err);
    h->section = *s;
    *out = h.release();
    return SFRAME_OK;
  });
}

sframe_status sframe_section_open_elf(const char* path, const char* section_name, sframe_section** out,
                                      sframe_error* err) {
  return guarded(err, [&] {
    if (!out || !path) return fail(SFRAME_E_INVALID_ARGUMENT, err);
    *out = nullptr;
    auto h = std::make_unique<sframe_section>();
    auto file = elf::ElfFile::open(path);
    if (!file) return fail(file.error(), err);
    h->file.emplace(std::move(*file));
    auto data = h->file->sframe_section(section_name ? section_name : ".sframe");
    if (!data) return fail(data.error(), err);
    // `owned` (relocated bytes) moves with the struct: the span is set after.
    h->data.emplace(std::move(*data));
    if (!h->data->owned.empty()) h->data->bytes = h->data->owned;
    auto s = Section::parse(h->data->bytes, h->data->address);
    if (!s) return fail(s.error(), err);
    h->section = *s;
    *out = h.release();
    return SFRAME_OK;
  });
}

sframe_status sframe_section_close(sframe_section* section) {
  delete section;
  return SFRAME_OK;
}

sframe_status sframe_section_get_info(const sframe_section* section, sframe_section_info* info) {
  if (!section || !info) return SFRAME_E_INVALID_ARGUMENT;
  const Section& s = section->section;
  const Header& h = s.header();
  sframe_section_info c{};
  c.version = static_cast<std::uint8_t>(h.version);
  c.abi = static_cast<std::uint8_t>(h.abi);
  c.flags = h.flags;
  c.big_endian = s.big_endian();
  c.cfa_fixed_fp_offset = h.cfa_fixed_fp_offset;
  c.cfa_fixed_ra_offset = h.cfa_fixed_ra_offset;
  c.auxhdr_len = h.auxhdr_len;
  c.num_fdes = h.num_fdes;
  c.num_fres = h.num_fres;
  c.fre_len = h.fre_len;
  c.address = s.address();
  c.used_size = s.used_size();
  c.size = s.bytes().size();
  *info = c;
  return SFRAME_OK;
}

sframe_status sframe_section_validate(const sframe_section* section, uint32_t strictness, sframe_error* err) {
  return guarded(err, [&] {
    if (!section || strictness > SFRAME_VALIDATE_STRICT) return fail(SFRAME_E_INVALID_ARGUMENT, err);
    auto ok = validate(section->section, strictness == SFRAME_VALIDATE_STRICT ? Strictness::kStrict
                                                                              : Strictness::kLenient);
    return ok ? SFRAME_OK : fail(ok.error(), err);
  });
}

sframe_status sframe_section_get_fde(const sframe_section* section, uint32_t index, sframe_fde* fde,
                                     sframe_error* err) {
  if (!section || !fde) return fail(SFRAME_E_INVALID_ARGUMENT, err);
  auto f = section->section.fde(index);
  if (!f) return fail(f.error(), err);
  *fde = to_c(*f);
  return SFRAME_OK;
}

sframe_status sframe_section_get_fres(const sframe_section* section, uint32_t fde_index, uint32_t first,
                                      sframe_fre* fres, size_t capacity, size_t* written, sframe_error* err) {
  if (!section || !written || (!fres && capacity > 0)) return fail(SFRAME_E_INVALID_ARGUMENT, err);
  *written = 0;
  const Section& s = section->section;
  auto f = s.fde(fde_index);
  if (!f) return fail(f.error(), err);
  std::uint32_t k = 0;
  for (const Expected<Fre>& fre : s.fres(*f)) {
    if (*written == capacity) break;
    if (!fre) return fail(fre.error(), err);
    if (k++ < first) continue;
    auto wire = s.wire_row(*f, *fre);
    if (!wire) return fail(wire.error(), err);
    auto row = s.row(*f, *fre);
    if (!row) return fail(row.error(), err);
    fres[(*written)++] = to_c(s, *wire, *row);
  }
  return SFRAME_OK;
}

sframe_status sframe_section_find(const sframe_section* section, uint64_t pc, sframe_match* match,
                                  sframe_error* err) {
  if (!section || !match) return fail(SFRAME_E_INVALID_ARGUMENT, err);
  auto m = find(section->section, pc);
  if (!m) return fail(m.error(), err);
  match->fde = to_c(m->fde);
  auto wire = section->section.wire_row(m->fde, m->fre);
  if (!wire) return fail(wire.error(), err);
  match->fre = to_c(section->section, *wire, m->row);
  return SFRAME_OK;
}

sframe_status sframe_encoder_create(const sframe_encoder_header* header, sframe_encoder** out) {
  return guarded(nullptr, [&] {
    if (!header || !out) return SFRAME_E_INVALID_ARGUMENT;
    *out = nullptr;
    if ((header->version != 2 && header->version != 3) || header->abi < SFRAME_ABI_AARCH64_BIG ||
        header->abi > SFRAME_ABI_S390X_BIG)
      return SFRAME_E_INVALID_ARGUMENT;
    SectionSpec spec;
    spec.version = static_cast<Version>(header->version);
    spec.abi = static_cast<Abi>(header->abi);
    spec.big_endian = header->big_endian != 0;
    spec.cfa_fixed_fp_offset = header->cfa_fixed_fp_offset;
    spec.cfa_fixed_ra_offset = header->cfa_fixed_ra_offset;
    spec.section_address = header->section_address;
    *out = new sframe_encoder{SectionEncoder(spec)};
    return SFRAME_OK;
  });
}

sframe_status sframe_encoder_add_function(sframe_encoder* encoder, const sframe_function* function,
                                          const sframe_row_spec* rows, size_t num_rows, sframe_error* err) {
  return guarded(err, [&] {
    if (!encoder || !function || (!rows && num_rows > 0) || function->pc_type > SFRAME_PC_TYPE_MASK ||
        function->fde_type > SFRAME_FDE_TYPE_FLEX || function->pauth_key > 1)
      return fail(SFRAME_E_INVALID_ARGUMENT, err);
    FunctionSpec f;
    f.start_pc = function->start_pc;
    f.size = function->size;
    f.pc_type = static_cast<PcType>(function->pc_type);
    f.fde_type = static_cast<FdeType>(function->fde_type);
    f.rep_size = function->rep_size;
    f.signal = function->signal != 0;
    f.pauth_key = static_cast<PauthKey>(function->pauth_key);
    f.rows.reserve(num_rows);
    for (std::size_t i = 0; i < num_rows; ++i) {
      const sframe_row& r = rows[i].row;
      if (!valid_rule(r.cfa) || !valid_rule(r.ra) || !valid_rule(r.fp)) {
        sframe_status s = fail(SFRAME_E_INVALID_ARGUMENT, err);
        if (err) {
          err->fde = static_cast<std::uint32_t>(encoder->encoder.size());
          err->fre = static_cast<std::uint32_t>(i);
        }
        return s;
      }
      f.rows.push_back(RowSpec{rows[i].start_offset, from_c(r)});
    }
    auto ok = encoder->encoder.add(f);
    return ok ? SFRAME_OK : fail(ok.error(), err);
  });
}

sframe_status sframe_encoder_finish(sframe_encoder* encoder, void** bytes, size_t* size, sframe_error* err) {
  return guarded(err, [&] {
    if (!encoder || !bytes || !size) return fail(SFRAME_E_INVALID_ARGUMENT, err);
    *bytes = nullptr;
    *size = 0;
    auto out = encoder->encoder.finish();
    if (!out) return fail(out.error(), err);
    // malloc, so that sframe_free is free() whatever produced the buffer.
    void* p = std::malloc(out->empty() ? 1 : out->size());
    if (!p) return fail(SFRAME_E_NO_MEMORY, err);
    if (!out->empty()) std::memcpy(p, out->data(), out->size());
    *bytes = p;
    *size = out->size();
    return SFRAME_OK;
  });
}

sframe_status sframe_encoder_destroy(sframe_encoder* encoder) {
  delete encoder;
  return SFRAME_OK;
}

sframe_status sframe_unwind_options_init(sframe_unwind_options* options) {
  if (!options) return SFRAME_E_INVALID_ARGUMENT;
  const UnwindOptions d;
  *options = sframe_unwind_options{};
  options->fp_fallback = d.fp_fallback;
  options->detect_sigreturn_code = d.detect_sigreturn_code;
  options->pauth_va_bits = d.pauth_va_bits;
  options->pauth_tbi = d.pauth_tbi;
  return SFRAME_OK;
}

sframe_status sframe_unwinder_create(size_t max_modules, sframe_unwinder** out) {
  return guarded(nullptr, [&] {
    if (!out) return SFRAME_E_INVALID_ARGUMENT;
    *out = nullptr;
    *out = new sframe_unwinder(max_modules);
    return SFRAME_OK;
  });
}

sframe_status sframe_unwinder_add_module(sframe_unwinder* unwinder, const sframe_section* section, uint64_t begin,
                                         uint64_t end, uint64_t bias, sframe_error* err) {
  if (!unwinder || !section) return fail(SFRAME_E_INVALID_ARGUMENT, err);
  Module m;
  m.range = AddressRange{begin, end};
  m.bias = bias;
  m.section = section->section;
  auto ok = unwinder->map.add(m);
  return ok ? SFRAME_OK : fail(ok.error(), err);
}

sframe_status sframe_unwinder_remove_module(sframe_unwinder* unwinder, uint64_t begin) {
  if (!unwinder) return SFRAME_E_INVALID_ARGUMENT;
  return unwinder->map.remove(begin) ? SFRAME_OK : SFRAME_E_INVALID_ARGUMENT;
}

sframe_status sframe_unwinder_destroy(sframe_unwinder* unwinder) {
  delete unwinder;
  return SFRAME_OK;
}

sframe_status sframe_unwind(const sframe_unwinder* unwinder, const sframe_regs* regs, sframe_read_word_fn read,
                            void* context, const sframe_unwind_options* options, sframe_frame* frames,
                            size_t capacity, sframe_unwind_result* result) {
  if (!unwinder || !regs || !read || !result || (!frames && capacity > 0) || regs->arch > SFRAME_ARCH_S390X)
    return SFRAME_E_INVALID_ARGUMENT;
  if (options && (options->pauth_va_bits < 32 || options->pauth_va_bits > 56 ||
                  (!options->signal_trampolines && options->num_signal_trampolines > 0) ||
                  (!options->code_ranges && options->num_code_ranges > 0)))
    return SFRAME_E_INVALID_ARGUMENT;
  Regs r;
  r.arch = static_cast<Arch>(regs->arch);
  r.pc = regs->pc;
  r.valid = regs->valid;
  for (unsigned i = 0; i < Regs::kNumDwarf; ++i) r.dwarf[i] = regs->dwarf[i];
  UnwindOptions o;
  static_assert(sizeof(sframe_range) == sizeof(AddressRange) && alignof(sframe_range) == alignof(AddressRange));
  if (options) {
    o.fp_fallback = options->fp_fallback != 0;
    o.detect_sigreturn_code = options->detect_sigreturn_code != 0;
    o.pauth_va_bits = options->pauth_va_bits;
    o.pauth_tbi = options->pauth_tbi != 0;
    // sframe_range and AddressRange are both {begin, end} of two uint64_t.
    o.signal_trampolines = std::span<const AddressRange>(
        reinterpret_cast<const AddressRange*>(options->signal_trampolines), options->num_signal_trampolines);
    o.code_ranges = std::span<const AddressRange>(reinterpret_cast<const AddressRange*>(options->code_ranges),
                                                  options->num_code_ranges);
  }
  // The walk writes sframe::Frame objects into the caller's array itself
  // (no allocation, so it stays async-signal-safe): capacity Frames laid
  // from its start (a Frame is no larger than an sframe_frame), then
  // converted from the last to the first, so that C slot i, which overlaps
  // only Frames i and later, is written once those have been read.
  static_assert(sizeof(Frame) <= sizeof(sframe_frame) && alignof(Frame) <= alignof(sframe_frame) &&
                std::is_trivially_destructible_v<Frame>);
  auto* storage = reinterpret_cast<unsigned char*>(frames);
  for (std::size_t i = 0; i < capacity; ++i) new (storage + i * sizeof(Frame)) Frame();
  Frame* laid = capacity ? std::launder(reinterpret_cast<Frame*>(storage)) : nullptr;
  const CallbackMemory mem{read, context};
  const UnwindResult u = unwind(unwinder->map, mem, r, std::span<Frame>(laid, capacity), o);
  for (std::size_t i = u.count; i-- > 0;) {
    const Frame f = *std::launder(reinterpret_cast<Frame*>(storage + i * sizeof(Frame)));
    const auto flags = static_cast<std::uint32_t>(f.flags | (f.pc.is_return_address() ? SFRAME_FRAME_RETURN_ADDRESS : 0));
    new (storage + i * sizeof(sframe_frame)) sframe_frame{f.pc.value(), f.sp, f.fp, f.cfa, flags, 0, 0};
  }
  result->count = u.count;
  result->stop = static_cast<std::uint32_t>(u.reason);
  result->error = u.reason == StopReason::kBadRule && u.error ? capi::to_status(*u.error) : SFRAME_OK;
  result->address = u.address;
  return SFRAME_OK;
}

}  // extern "C"
