// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/byte_order.hpp> moved to
// <sframe/format/byte_order.hpp>, as the header folders name the libraries
// (this one: libsframepp-format). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/format/byte_order.hpp"  // IWYU pragma: export
