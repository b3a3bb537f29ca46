// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/section.hpp> moved to
// <sframe/format/section.hpp>, as the header folders name the libraries
// (this one: libsframepp-format). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/format/section.hpp"  // IWYU pragma: export
