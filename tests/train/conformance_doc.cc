// Prints the conformance matrix in Markdown: what docs/training.md shows between its
// "conformance matrix" markers (the test ConformanceDoc checks that it does).
#include <iostream>

#include "conformance_table.h"

int main() { std::cout << distml::train::conformance::markdown(); }
