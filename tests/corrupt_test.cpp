// Placeholder: the table-driven corruption test is being written.
#include <gtest/gtest.h>
