// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/detail/unwind_step.hpp> moved to
// <sframe/unwind/detail/unwind_step.hpp>, as the header folders name the libraries
// (this one: libsframepp-unwind). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/unwind/detail/unwind_step.hpp"  // IWYU pragma: export
