// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/elf.hpp> moved to
// <sframe/elf/elf.hpp>, as the header folders name the libraries
// (this one: libsframepp). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/elf/elf.hpp"  // IWYU pragma: export
