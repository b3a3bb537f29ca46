// SPDX-License-Identifier: MIT
// sframepp: the table of mapped files Sessions share (file_table.hpp).
#include "file_table.hpp"

#include <optional>
#include <unordered_map>
#include <utility>

#include "sframe/elf/elf.hpp"
#include "sframe/elf/symbols.hpp"
#include "sframe/process/process.hpp"

namespace sframe::perf {

struct FileTable::Impl {
  std::unordered_map<std::string, Entry> by_path;
  std::optional<Entry> vdso;

  static Entry open(const std::string& path) {
    Entry e;
    if (auto f = elf::ElfFile::open(path)) {
      e.file = std::make_shared<const elf::ElfFile>(std::move(*f));
      e.build_id = elf::build_id(*e.file).value_or("");
    }
    return e;
  }
};

FileTable::FileTable() : impl_(std::make_unique<Impl>()) {}
FileTable::~FileTable() = default;

const FileTable::Entry& FileTable::open(const std::string& path, std::string_view want_id) {
  auto [it, fresh] = impl_->by_path.try_emplace(path);
  if (fresh) {
    it->second = Impl::open(path);
  } else if (!want_id.empty() && it->second.build_id != want_id) {
    if (Entry again = Impl::open(path); again.file && again.build_id == want_id) it->second = std::move(again);
  }
  return it->second;
}

const FileTable::Entry& FileTable::vdso() {
  if (!impl_->vdso) {
    Entry& e = impl_->vdso.emplace();
    if (auto v = process::own_vdso()) {
      if (auto notes = v->section_bytes(".note")) e.build_id = elf::gnu_build_id(notes->bytes).value_or("");
      e.file = std::make_shared<const elf::ElfFile>(std::move(*v));
    }
  }
  return *impl_->vdso;
}

}  // namespace sframe::perf
