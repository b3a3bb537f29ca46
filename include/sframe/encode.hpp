// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/encode.hpp> moved to
// <sframe/format/encode.hpp>, as the header folders name the libraries
// (this one: libsframepp-format). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/format/encode.hpp"  // IWYU pragma: export
