// A Python callable that C++ keeps past the call handing it over (a GroupPolicy's callbacks,
// module_policy.cc): shared by every copy of the std::function holding it and released with the
// GIL taken, since the last copy may go on a thread without the GIL; after Python has shut down
// it is left alone rather than touched.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <utility>

namespace xccl::backend {

inline std::shared_ptr<pybind11::object> holdPython(pybind11::object callable) {
  return std::shared_ptr<pybind11::object>(new pybind11::object(std::move(callable)),
                                           [](pybind11::object* held) {
                                             if (Py_IsInitialized()) {
                                               pybind11::gil_scoped_acquire gil;
                                               delete held;
                                             }
                                           });
}

}  // namespace xccl::backend
