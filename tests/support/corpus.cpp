// SPDX-License-Identifier: MIT
#include "support/corpus.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace sframe_test {

std::filesystem::path shared_dir() { return SFRAMEPP_SHARED_DIR; }

std::string GoldenCase::name() const { return dir.filename().string() + "/" + file; }

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> out;
  const auto root = shared_dir() / "corpus";
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string fname = it->path().filename().string();
    const std::string suffix = ".objdump.txt";
    if (fname.size() <= suffix.size() || fname.compare(fname.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    out.push_back({it->path().parent_path(), fname.substr(0, fname.size() - suffix.size()), it->path()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.golden < b.golden; });
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sframe_test
