// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/symbols.hpp> moved to
// <sframe/elf/symbols.hpp>, as the header folders name the libraries
// (this one: libsframepp). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/elf/symbols.hpp"  // IWYU pragma: export
