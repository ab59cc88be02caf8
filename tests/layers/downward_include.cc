// The control of upward_include.cc: the same layer's include path finds a
// header of a layer below it.
#include "base/result.h"
#include "transports/transport.h"
