// SPDX-License-Identifier: MIT
// sframepp: kernel frames' names from kallsyms (see kernel_symbols.hpp).
#include "kernel_symbols.hpp"

#include <elf.h>
#include <unistd.h>

#include "perf_unwind.hpp"
#include "sframe/elf/symbols.hpp"

namespace sframe::perf::detail {

void KernelSymbols::read() {
  read_ = true;
  std::string path = kallsyms_;
  std::string index_path;
  for (const std::string& b : build_ids_) {
    const std::string cached = kallsyms_cache_path(buildid_dir_, b);
    if (::access(cached.c_str(), R_OK) == 0) {
      path = cached;
      index_path = kallsyms_index_path(buildid_dir_, b);
    }
  }
  // /proc/kallsyms is read (it cannot be mapped), perf's cached copy
  // mapped; 64 MiB bounds a hostile source (a real one is ~10 MB).
  if (file_.open(path, std::size_t{64} << 20) != 0) return;
  text_ = file_.text();
  // The copy's index where `sframe record` saved one (checked against the
  // text), else a scan of the text.
  if (!index_path.empty()) {
    FileBytes saved;
    if (saved.open(index_path, std::size_t{64} << 20) == 0)
      if (auto k = KallsymsIndex::load(text_, saved.bytes())) index_.emplace(std::move(*k));
  }
  if (!index_) index_.emplace(text_);
  if (const std::uint64_t text = kallsyms_address(text_, "_text"); text && recorded_text_)
    delta_ = text - recorded_text_;
}

// The name of the kernel symbol starting at group.front().address (the
// group of aliases there, in file order), chosen by the shared symbol
// reader's perf policy over that group. Sizes as perf's
// symbols__fixup_end() makes them: each alias ends where the next symbol in
// file order starts, so all but the last of the group are zero-sized and
// the last reaches `next` (perf 6.1 and 7.2 both name memcpy's address
// "__pi_memcpy", the last of "memcpy", "__memcpy", "__pi_memcpy").
const std::optional<std::string>& KernelSymbols::name_of(const std::vector<KSym>& group, std::uint64_t next) {
  auto [it, fresh] = names_.try_emplace(group.front().address);
  if (!fresh) return it->second;
  std::vector<elf::FunctionSymbol> syms;
  const std::uint64_t size = next != 0 ? next - group.front().address : 0;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const KSym& k = group[i];
    elf::FunctionSymbol f;
    f.name.assign(text_.substr(k.name_at, k.name_len));
    f.address = k.address;
    f.size = i + 1 == group.size() ? size : 0;
    f.binding = k.type == 'T' ? STB_GLOBAL : (k.type == 'W' || k.type == 'w') ? STB_WEAK : STB_LOCAL;
    f.type = STT_FUNC;
    f.order = static_cast<std::uint32_t>(i);
    syms.push_back(std::move(f));
  }
  const elf::SymbolTable t = elf::SymbolTable::from_symbols(std::move(syms), elf::NamingPolicy::kPerf);
  if (auto hit = t.find(group.front().address)) it->second = t.display_name(*hit->symbol);
  return it->second;
}

KernelSymbols::Function KernelSymbols::find(std::uint64_t addr) {
  if (!read_) read();
  // Per address: kernel callchains repeat a few hundred addresses.
  auto [it, fresh] = by_address_.try_emplace(addr);
  Function& f = it->second;
  if (fresh && index_) {
    std::uint64_t next = 0;
    const std::uint64_t at = addr + delta_;  // in the read text's addresses
    // The last symbol holds only its own address (no next start).
    if (index_->lookup(at, group_, next) && (next != 0 || at == group_.front().address)) {
      if (const std::optional<std::string>& name = name_of(group_, next)) {
        f.name = &*name;
        f.start = group_.front().address - delta_;
      }
    }
  }
  return f;
}

}  // namespace sframe::perf::detail
