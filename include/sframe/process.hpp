// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/process.hpp> moved to
// <sframe/process/process.hpp>, as the header folders name the libraries
// (this one: libsframepp-process). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/process/process.hpp"  // IWYU pragma: export
