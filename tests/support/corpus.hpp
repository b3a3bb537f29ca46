// SPDX-License-Identifier: MIT
// Access to ../shared/corpus: the GNU-made files and their golden dumps.
#pragma once

#include <cstddef>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace sframe_test {

/// Root of the shared folder (corpus, bench), set at build time.
std::filesystem::path shared_dir();

/// One corpus file with a golden `objdump --sframe` output beside it.
struct GoldenCase {
  std::filesystem::path dir;   // the file's folder
  std::string file;            // bare file name, as objdump was given it
  std::filesystem::path golden;
  std::string name() const;    // "folder/file", for test names
};

/// gtest prints parameters with this: the case's name, not its bytes.
inline void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name(); }

/// Every file under corpus/ that has a FILE.objdump.txt, sorted by path.
std::vector<GoldenCase> golden_cases();

/// Whole file contents; empty if unreadable.
std::string read_file(const std::filesystem::path& p);

}  // namespace sframe_test
