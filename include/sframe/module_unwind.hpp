// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/module_unwind.hpp> moved to
// <sframe/unwind/module_unwind.hpp>, as the header folders name the libraries
// (this one: libsframepp-unwind). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/unwind/module_unwind.hpp"  // IWYU pragma: export
