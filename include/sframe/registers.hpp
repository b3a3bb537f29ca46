// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/registers.hpp> moved to
// <sframe/unwind/registers.hpp>, as the header folders name the libraries
// (this one: libsframepp-unwind). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/unwind/registers.hpp"  // IWYU pragma: export
