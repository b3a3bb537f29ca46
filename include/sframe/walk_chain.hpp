// SPDX-License-Identifier: MIT
// Forwarding header: <sframe/walk_chain.hpp> moved to
// <sframe/process/walk_chain.hpp>, as the header folders name the libraries
// (this one: libsframepp-process). Include the new path: this one will be
// removed in the next minor version.
#pragma once
#include "sframe/process/walk_chain.hpp"  // IWYU pragma: export
