// SPDX-License-Identifier: MIT
// BacktraceOptions::release_cfi_pages: once a module's SFrame is generated,
// the .eh_frame pages reading it mapped go back (src/backtrace/page_release.cpp),
// except where a relocation may have written them. Truth from outside the
// library: the kernel's /proc/self/pagemap (is a page mapped), GNU readelf
// (where .eh_frame lies), libgcc's own unwinder and glibc's backtrace()
// before and after (the program's use of the released pages), and program
// headers written out by hand for the rule itself.
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>
#include <unwind.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../src/backtrace/page_release.hpp"
#include "glibc_backtrace.hpp"
#include "sframe/backtrace/backtrace.hpp"

namespace {

using sframe::bt::PageRange;
using sframe::bt::releasable_pages;

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

// A module loaded in this process: its path and load bias (link_map).
struct Loaded {
  std::string path;
  std::uint64_t bias = 0;
};

Loaded loaded(void* handle) {
  link_map* lm = nullptr;
  if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return {};
  return {lm->l_name, lm->l_addr};
}

// A section's (.eh_frame's) link-time address and size, from `readelf -SW`.
bool eh_frame_of(const std::string& path, std::uint64_t& addr, std::uint64_t& size,
                 const std::string& section = ".eh_frame") {
  std::istringstream in(run("readelf -SW '" + path + "'"));
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find(" " + section + " ");
    if (at == std::string::npos) continue;
    std::istringstream f(line.substr(at));
    std::string name, type, a, off, sz;
    f >> name >> type >> a >> off >> sz;
    addr = std::stoull(a, nullptr, 16);
    size = std::stoull(sz, nullptr, 16);
    return true;
  }
  return false;
}

// How many of the whole pages inside runtime [b, e) are mapped in this
// process: /proc/self/pagemap bit 63, "page present" (kernel
// Documentation/admin-guide/mm/pagemap.rst); -1 when unreadable.
long present_pages(std::uint64_t b, std::uint64_t e) {
  const std::uint64_t page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  b = (b + page - 1) / page;
  e = e / page;
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long n = 0;
  for (std::uint64_t p = b; p < e; ++p) {
    std::uint64_t entry = 0;
    if (pread(fd, &entry, sizeof entry, static_cast<off_t>(p * 8)) != sizeof entry) {
      close(fd);
      return -1;
    }
    n += (entry >> 63) & 1;
  }
  close(fd);
  return n;
}

// The whole pages inside a module's .eh_frame, as runtime addresses.
struct EhFramePages {
  std::uint64_t begin = 0, end = 0;
  long count() const {
    const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    return static_cast<long>(end / page) - static_cast<long>((begin + page - 1) / page);
  }
};

EhFramePages eh_frame_pages(const Loaded& m) {
  std::uint64_t a = 0, s = 0;
  EXPECT_TRUE(eh_frame_of(m.path, a, s)) << m.path;
  return {m.bias + a, m.bias + a + s};
}

sframe::BacktraceModuleSource source_of(const std::string& path) {
  char want[4096], got[4096];
  if (!realpath(path.c_str(), want)) return sframe::BacktraceModuleSource::kNone;
  for (const auto& m : sframe::backtrace_report().modules)
    if (realpath(m.name.c_str(), got) && std::string(got) == want) return m.source;
  return sframe::BacktraceModuleSource::kNone;
}

// libgcc's unwinder (_Unwind_Backtrace, which reads .eh_frame) and glibc's
// backtrace() from one call site.
_Unwind_Reason_Code note(_Unwind_Context* ctx, void* arg) {
  static_cast<std::vector<std::uintptr_t>*>(arg)->push_back(_Unwind_GetIP(ctx));
  return _URC_NO_REASON;
}

struct AppTraces {
  std::vector<std::uintptr_t> libgcc;
  std::vector<void*> glibc;
};

[[gnu::noinline]] AppTraces app_traces() {
  AppTraces t;
  _Unwind_Backtrace(note, &t.libgcc);
  void* out[256];
  const int n = sframe_test::glibc_backtrace_fn()(out, 256);
  t.glibc.assign(out, out + (n > 0 ? n : 0));
  return t;
}

[[gnu::noinline]] void thrower(int v) {
  if (v >= 0) throw std::runtime_error("page release " + std::to_string(v));
}

// backtrace_init(o) that generates every module again, whatever an
// earlier init in this process built: options that differ from the last
// init's rebuild the table (backtrace.hpp), and so do `o`'s after them.
bool fresh_init(sframe::BacktraceOptions o) {
  o.background_generation = false;
  sframe::BacktraceOptions other = o;
  other.generated_version = o.generated_version == sframe::Version::kV3 ? sframe::Version::kV2 : sframe::Version::kV3;
  return sframe::backtrace_init(other) && sframe::backtrace_init(o);
}

Loaded libstdcxx() { return loaded(dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD)); }

// Pages of 0x1000 bytes; a module at bias 0x100000 (runtime = link + bias).
constexpr std::uint64_t kBias = 0x100000;

ElfW(Phdr) phdr(std::uint32_t type, std::uint32_t flags, std::uint64_t vaddr, std::uint64_t filesz,
                std::uint64_t memsz) {
  ElfW(Phdr) p{};
  p.p_type = type;
  p.p_flags = flags;
  p.p_vaddr = vaddr;
  p.p_filesz = filesz;
  p.p_memsz = memsz;
  return p;
}

}  // namespace

// The rule, on program headers written by hand (pages worked out by hand).
TEST(PageRelease, RuleOnHandMadeProgramHeaders) {
  // R segment [0x0, 0xa000) of file bytes, then a writable one from 0xb000.
  std::vector<ElfW(Phdr)> ph = {phdr(PT_LOAD, PF_R, 0x0, 0xa000, 0xa000),
                                phdr(PT_LOAD, PF_R | PF_X, 0xa000, 0x800, 0x800),
                                phdr(PT_LOAD, PF_R | PF_W, 0xb000, 0x1000, 0x2000),
                                phdr(PT_GNU_RELRO, PF_R, 0xb000, 0x800, 0x800)};
  // CFI bytes [0x1800, 0x9100): the whole pages inside are 0x2000-0x9000.
  EXPECT_EQ(releasable_pages(ph, kBias, kBias + 0x1800, kBias + 0x9100, 0x1000, false),
            (PageRange{kBias + 0x2000, kBias + 0x9000}));
  // Bytes running past the segment's file part: cut at its last whole page.
  EXPECT_EQ(releasable_pages(ph, kBias, kBias + 0x1800, kBias + 0xa800, 0x1000, false),
            (PageRange{kBias + 0x2000, kBias + 0xa000}));
  // Text relocations: the loader may have written any read-only page.
  EXPECT_EQ(releasable_pages(ph, kBias, kBias + 0x1800, kBias + 0x9100, 0x1000, true), PageRange{});
  // Less than a whole page: nothing.
  EXPECT_EQ(releasable_pages(ph, kBias, kBias + 0x1800, kBias + 0x2800, 0x1000, false), PageRange{});
  // Bytes in the writable segment (.eh_frame after .data): nothing.
  EXPECT_EQ(releasable_pages(ph, kBias, kBias + 0xb000, kBias + 0xc000, 0x1000, false), PageRange{});
  // Bytes in no segment: nothing.
  EXPECT_EQ(releasable_pages(ph, kBias, kBias + 0x20000, kBias + 0x30000, 0x1000, false), PageRange{});
  // A writable segment mapped over part of the read-only one's pages (even
  // one byte of a page): the range is refused whole.
  std::vector<ElfW(Phdr)> over = ph;
  over.push_back(phdr(PT_LOAD, PF_R | PF_W, 0x8fff, 0x1, 0x1));
  EXPECT_EQ(releasable_pages(over, kBias, kBias + 0x1800, kBias + 0x9100, 0x1000, false), PageRange{});
  // The same with PT_GNU_RELRO (relocated, then made read-only).
  over = ph;
  over.push_back(phdr(PT_GNU_RELRO, PF_R, 0x3000, 0x10, 0x10));
  EXPECT_EQ(releasable_pages(over, kBias, kBias + 0x1800, kBias + 0x9100, 0x1000, false), PageRange{});
  // A writable segment on the page after the range's last one: not overlapping.
  over = ph;
  over.push_back(phdr(PT_LOAD, PF_R | PF_W, 0x9100, 0x10, 0x10));
  EXPECT_EQ(releasable_pages(over, kBias, kBias + 0x1800, kBias + 0x9100, 0x1000, false),
            (PageRange{kBias + 0x2000, kBias + 0x9000}));
}

// libstdc++'s .eh_frame pages go back after init, and the program's own use
// of them (a C++ exception, libgcc's _Unwind_Backtrace, glibc's backtrace())
// works as before: the pages come back from the file.
TEST(PageRelease, LibstdcxxEhFramePagesGoBackAndTheProgramStillUnwinds) {
  const Loaded cxx = libstdcxx();
  ASSERT_FALSE(cxx.path.empty());
  const EhFramePages eh = eh_frame_pages(cxx);
  ASSERT_GT(eh.count(), 8) << cxx.path;
  std::vector<AppTraces> t;
  for (int i = 0; i < 2; ++i) {
    if (i == 1) {
      ASSERT_TRUE(fresh_init({}));
      ASSERT_EQ(source_of(cxx.path), sframe::BacktraceModuleSource::kGenerated)
          << cxx.path << " has PT_GNU_SFRAME: nothing generated, nothing released";
      EXPECT_EQ(present_pages(eh.begin, eh.end), 0) << "of " << eh.count() << " pages of " << cxx.path;
      // The .eh_frame_hdr right before it goes with it (libstdc++: ld puts
      // it there).
      std::uint64_t hdr = 0, hdr_size = 0;
      ASSERT_TRUE(eh_frame_of(cxx.path, hdr, hdr_size, ".eh_frame_hdr")) << cxx.path;
      ASSERT_LE(cxx.bias + hdr + hdr_size, eh.begin) << cxx.path;
      ASSERT_LT(eh.begin - (cxx.bias + hdr + hdr_size), 16u) << cxx.path << ": .eh_frame_hdr not right before .eh_frame";
      EXPECT_EQ(present_pages(cxx.bias + hdr, eh.end), 0) << "from .eh_frame_hdr on, in " << cxx.path;
    }
    t.push_back(app_traces());
  }
  EXPECT_EQ(t[0].libgcc, t[1].libgcc);
  EXPECT_EQ(t[0].glibc, t[1].glibc);
  EXPECT_GE(t[1].libgcc.size(), 3u);
  std::string what;
  try {
    thrower(7);
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  EXPECT_EQ(what, "page release 7");
  // The throw read libstdc++'s FDEs (__cxa_throw's frame) again.
  EXPECT_GT(present_pages(eh.begin, eh.end), 0);
  EXPECT_EQ(app_traces().glibc.size(), t[1].glibc.size());
}

// release_cfi_pages = false keeps what generation read mapped (and shows
// that the pagemap check above sees pages the generator read).
TEST(PageRelease, OffKeepsThePages) {
  const Loaded cxx = libstdcxx();
  ASSERT_FALSE(cxx.path.empty());
  const EhFramePages eh = eh_frame_pages(cxx);
  sframe::BacktraceOptions o;
  o.release_cfi_pages = false;
  ASSERT_TRUE(fresh_init(o));
  EXPECT_EQ(present_pages(eh.begin, eh.end), eh.count());
}

// A module whose .eh_frame a writable segment maps (a linker script put it
// after .data), and one with text relocations: generated from, never
// released.
TEST(PageRelease, WritableOrTextRelocatedEhFrameStaysMapped) {
  for (const char* path : {SFRAMEPP_BT_EH_WRITABLE_PATH, SFRAMEPP_BT_TEXTREL_PATH}) {
    const std::string readelf = run(std::string("readelf -lWd '") + path + "'");
    if (std::string(path) == SFRAMEPP_BT_TEXTREL_PATH) {
      ASSERT_NE(readelf.find("(TEXTREL)"), std::string::npos) << readelf;
    }
    void* h = dlopen(path, RTLD_NOW);
    ASSERT_NE(h, nullptr) << dlerror();
    const Loaded m = loaded(h);
    const EhFramePages eh = eh_frame_pages(m);
    ASSERT_GE(eh.count(), 3) << path;
    ASSERT_TRUE(fresh_init({}));
    ASSERT_EQ(source_of(m.path), sframe::BacktraceModuleSource::kGenerated) << path;
    EXPECT_EQ(present_pages(eh.begin, eh.end), eh.count()) << path;
    // Its functions are still what they were (the loader's writes kept).
    using Fn = int (*)(int);
    auto fn = reinterpret_cast<Fn>(dlsym(h, "many_f123"));
    ASSERT_NE(fn, nullptr);
    EXPECT_EQ(fn(2), 2 * 126 + 123);
  }
}
