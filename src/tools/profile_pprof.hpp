// SPDX-License-Identifier: MIT
// A Profile as pprof's profile.proto (github.com/google/pprof,
// proto/profile.proto; schema in profile.proto beside this file), gzipped:
// the file `go tool pprof`, Pyroscope, Parca and Grafana read.
#pragma once

#include <cstdint>
#include <string>

#include "profile.hpp"

namespace sframe::tools::profile {

/// What a pprof file says besides the samples.
struct PprofOptions {
  /// A comment line (e.g. the command that wrote it); empty: none.
  std::string comment;
};

/// The gzipped profile.proto of `p`:
///  - sample types, per event in order of appearance: "samples"/"count",
///    then the period: "cpu"/"nanoseconds" for cpu-clock and task-clock,
///    else EVENT/"count" (with several events, each type name is prefixed
///    "EVENT/");
///  - a Sample per distinct (pid, tid, comm, event, stack), with numeric
///    labels "pid" and "tid" and the string label "comm";
///  - a Mapping per distinct process mapping (runtime start and limit, file
///    offset, file, build-id; a mapping of unknown extent spans its PCs),
///    a Location per distinct frame (its runtime PC and mapping; a Line with
///    its Function when the name is known), a Function per distinct name
///    and source file;
///  - string 0 is "".
/// Throws std::runtime_error when serialization or compression fails.
std::string pprof_bytes(const Profile& p, const PprofOptions& opt = {});

}  // namespace sframe::tools::profile
