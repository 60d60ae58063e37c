// Releasing the GIL around the backend's own blocking waits.
#pragma once

#include <Python.h>

namespace xccl::backend {

// Releases the GIL for a scope if this thread holds it, and takes it back at the end. For waits on
// the backend's own threads: when Python drops a tensor that a queued call still references,
// torch hands the Python object to the C++ tensor, and the thread that drops that reference last
// (our worker, when the call ends) must take the GIL to free it. A thread holding the GIL while
// it joins that worker (the destructor runs where Python dropped the group) would wait forever.
class GilReleasedIfHeld {
 public:
  GilReleasedIfHeld() {
    if (Py_IsInitialized() && PyGILState_Check()) state_ = PyEval_SaveThread();
  }
  ~GilReleasedIfHeld() {
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  GilReleasedIfHeld(const GilReleasedIfHeld&) = delete;
  GilReleasedIfHeld& operator=(const GilReleasedIfHeld&) = delete;

 private:
  PyThreadState* state_ = nullptr;
};

}  // namespace xccl::backend
