// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/detail/scratch.hpp> moved to
// <sframe/format/detail/scratch.hpp>, as the header folders name the libraries
// (this one: libsframepp-format). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/format/detail/scratch.hpp"  // IWYU pragma: export
