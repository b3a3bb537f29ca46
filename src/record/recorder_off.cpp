// SPDX-License-Identifier: MIT
// sframepp: the recorder of a build configured with -DSFRAMEPP_RECORD=OFF
// (no BPF tool chain): `sframe record` says so.
#include "recorder.hpp"

namespace sframe::record {

std::string unavailable_reason() {
  return "this sframe was built without sframe record (configured with -DSFRAMEPP_RECORD=OFF: clang's BPF target, "
         "bpftool and libbpf are needed)";
}

std::string record(const RecordOptions&, RecordSummary&) { return unavailable_reason(); }

const char* stop_name(std::size_t) noexcept { return "?"; }

}  // namespace sframe::record
