// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/consumers.hpp> moved to
// <sframe/format/consumers.hpp>, as the header folders name the libraries
// (this one: libsframepp-format). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/format/consumers.hpp"  // IWYU pragma: export
