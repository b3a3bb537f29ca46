// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/stop_reason.hpp> moved to
// <sframe/unwind/stop_reason.hpp>, as the header folders name the libraries
// (this one: libsframepp-unwind). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/unwind/stop_reason.hpp"  // IWYU pragma: export
