// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/unwind.hpp> moved to
// <sframe/unwind/unwind.hpp>, as the header folders name the libraries
// (this one: libsframepp-unwind). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/unwind/unwind.hpp"  // IWYU pragma: export
