// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/cfi_reader.hpp> moved to
// <sframe/unwind/cfi_reader.hpp>, as the header folders name the libraries
// (this one: libsframepp-unwind). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/unwind/cfi_reader.hpp"  // IWYU pragma: export
