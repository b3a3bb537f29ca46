// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/output_file.hpp> moved to
// <sframe/elf/output_file.hpp>, as the header folders name the libraries
// (this one: libsframepp). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/elf/output_file.hpp"  // IWYU pragma: export
