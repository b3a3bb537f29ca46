// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/detail/row_shape.hpp> moved to
// <sframe/format/detail/row_shape.hpp>, as the header folders name the libraries
// (this one: libsframepp-format). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/format/detail/row_shape.hpp"  // IWYU pragma: export
