// Prints the mangled type of every function of whichever nccl.h it is built
// against, one "name type" line each. The type string encodes the return type
// and every parameter type (through typedef names where the C types are
// anonymous), so diffing the output for NVIDIA's header and braid's proves the
// signatures match. The list of names comes from abi_functions.inc, which
// run_abi_compare.sh extracts from the headers.
#include <nccl.h>

#include <cstdio>
#include <typeinfo>

int main() {
#define ABI_FUNCTION(fn) std::printf("%s %s\n", #fn, typeid(decltype(&fn)).name());
#include "abi_functions.inc"
#undef ABI_FUNCTION
  return 0;
}
