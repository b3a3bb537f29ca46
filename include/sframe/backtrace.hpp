// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/backtrace.hpp> moved to
// <sframe/backtrace/backtrace.hpp>, as the header folders name the libraries
// (this one: libsframepp-backtrace). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/backtrace/backtrace.hpp"  // IWYU pragma: export
