// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/cfi.hpp> moved to
// <sframe/cfi/cfi.hpp>, as the header folders name the libraries
// (this one: libsframepp-cfi). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/cfi/cfi.hpp"  // IWYU pragma: export
