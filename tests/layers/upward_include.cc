// Compiled with the transports layer's include path by
// tests/layers/build_enforces_layers.sh: the engine sits above the transports,
// so this include must not be found.
#include "engine/comm.h"
