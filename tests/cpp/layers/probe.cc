// Compiled once per probe of CMakeLists.txt, each with the include paths of one library and one
// header of another layer: the build must fail exactly where the layers' rule forbids the include.
#include XCCL_PROBE_HEADER
