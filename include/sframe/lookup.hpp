// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/lookup.hpp> moved to
// <sframe/format/lookup.hpp>, as the header folders name the libraries
// (this one: libsframepp-format). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/format/lookup.hpp"  // IWYU pragma: export
