// xccl._C.GroupPolicy: the Python callables a group calls back (core/group_policy.h), each
// wrapped so that it takes the GIL, is released with the GIL (python_held.h) and answers as the
// empty policy where Python raises or answers oddly (the vendor factory excepted: its error is the
// CUDA call's). python/xccl/_registration.py builds the package's policy; ProcessGroupXccl.Options
// carries it to the group.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <string>

#include "backend/core/group_policy.h"
#include "backend/python_held.h"

namespace py = pybind11;

namespace xccl::backend {
namespace {

GroupPolicy::VendorFactory vendorFactoryFrom(py::object factory) {
  if (factory.is_none()) return nullptr;
  auto held = holdPython(std::move(factory));
  return [held](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                std::chrono::milliseconds timeout, const std::string& groupName) {
    py::gil_scoped_acquire gil;
    py::object group = (*held)(store, rank, size, timeout, groupName);
    if (group.is_none()) return c10::intrusive_ptr<c10d::Backend>();
    return group.cast<c10::intrusive_ptr<c10d::Backend>>();
  };
}

GroupPolicy::KernelCheck kernelCheckFrom(py::object check) {
  if (check.is_none()) return nullptr;
  auto held = holdPython(std::move(check));
  return [held]() -> KernelCheckResult {
    py::gil_scoped_acquire gil;
    // A check that raises or answers oddly means "not verified", never a failed group.
    try {
      py::tuple answer = (*held)();
      return {answer[0].cast<bool>(), answer[1].cast<std::string>()};
    } catch (const std::exception& e) {
      return {false, std::string("the verification check failed: ") + e.what()};
    }
  };
}

GroupPolicy::TuningSource tuningSourceFrom(py::object source) {
  if (source.is_none()) return nullptr;
  auto held = holdPython(std::move(source));
  return [held]() -> algo::TuningAnswer {
    py::gil_scoped_acquire gil;
    // A source that raises or answers oddly means no table, never a failed group.
    try {
      py::tuple answer = (*held)();
      if (answer.size() != 2) return {"", "the tuning source answered oddly"};
      return {answer[0].cast<std::string>(), answer[1].cast<std::string>()};
    } catch (const std::exception& e) {
      return {"", std::string("the tuning source failed: ") + e.what()};
    }
  };
}

}  // namespace

void bindPolicy(py::module& m) {
  // Immutable once built: the groups holding it read it from any thread.
  py::class_<GroupPolicy, std::shared_ptr<GroupPolicy>>(
      m, "GroupPolicy",
      "What an xccl group calls back into Python for (csrc/backend/core/group_policy.h): set "
      "as ProcessGroupXccl.Options.policy when the group is created; children of split and "
      "shrink inherit their parent's. A missing callable answers as C++ without the Python "
      "package: no vendor group, kernels not verified, no tuning table.")
      .def(py::init([](py::object vendorFactory, py::object kernelCheck, py::object tuningSource) {
             auto policy = std::make_shared<GroupPolicy>();
             policy->vendorFactory = vendorFactoryFrom(std::move(vendorFactory));
             policy->kernelCheck = kernelCheckFrom(std::move(kernelCheck));
             policy->tuningSource = tuningSourceFrom(std::move(tuningSource));
             return policy;
           }),
           py::arg("vendor_factory") = py::none(), py::arg("kernel_check") = py::none(),
           py::arg("tuning_source") = py::none(),
           "vendor_factory: (store, rank, size, timeout, group_name) -> Backend or None, the "
           "inner NCCL/RCCL group for GPU collectives without a kernel, built on first need. "
           "kernel_check: () -> (verified: bool, why: str), whether xccl's GPU kernels were "
           "verified on this machine, asked at each GPU side's creation. tuning_source: () -> "
           "(text: str, why: str), this rank's tuning table ('' for none), asked at each "
           "membership's creation; the group plans from rank 0's.")
      .def_property_readonly(
          "callbacks",
          [](const GroupPolicy& p) {
            py::list names;
            if (p.vendorFactory) names.append("vendor_factory");
            if (p.kernelCheck) names.append("kernel_check");
            if (p.tuningSource) names.append("tuning_source");
            return names;
          },
          "The names of the callables this policy holds.");
}

}  // namespace xccl::backend
