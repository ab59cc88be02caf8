// A process-wide object of the fake runtime that is never destroyed: stream
// workers and CUDA callbacks may still use it while the process exits, after
// static destructors ran.
#pragma once

namespace fakecuda {

template <class T>
T& immortal() {
  union Holder {
    Holder() : value() {}
    ~Holder() {}
    T value;
  };
  static Holder holder;
  return holder.value;
}

}  // namespace fakecuda
