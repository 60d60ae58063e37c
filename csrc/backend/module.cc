// The xccl._C Python module: the backend class, its options, and small introspection helpers.
// Registration under the name "xccl" happens in Python (python/xccl/_registration.py).
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "backend/core/work.h"
#include "backend/process_group.h"
#include "backend/recorder/flight_recorder.h"
#include "backend/window/window.h"

namespace py = pybind11;

namespace xccl::backend {
namespace {

using Options = ProcessGroupXccl::Options;

c10::intrusive_ptr<Options> copyOptions(const Options& options) {
  return c10::make_intrusive<Options>(options);
}

}  // namespace

void bindPlan(py::module& m);  // module_rows.cc
void bindPolicy(py::module& m);  // module_policy.cc
void bindTuning(py::module& m);  // module_tuning.cc

PYBIND11_MODULE(_C, m) {
  m.doc() = "xccl: collective-communication backend for torch.distributed";
  // The base classes must be registered with pybind11 before ours refer to them.
  py::module::import("torch.distributed");
  bindPolicy(m);  // before Options, whose policy holds one

  py::class_<Options, c10d::Backend::Options, c10::intrusive_ptr<Options>>(m, "Options")
      .def(py::init<>())
      .def_readwrite("algorithm", &Options::algorithm,
                     "Force an algorithm for this group: '' (XCCL_ALGO), auto, direct, ring, "
                     "shm")
      .def_readwrite("store_host", &Options::storeHost,
                     "Host whose route picks the interface to listen on")
      .def_property(
          "timeout", [](const Options& o) { return o.timeout; },
          [](Options& o, std::chrono::milliseconds t) { o.timeout = t; })
      .def_property(
          "policy", [](const Options& o) { return std::const_pointer_cast<GroupPolicy>(o.policy); },
          [](Options& o, std::shared_ptr<GroupPolicy> policy) { o.policy = std::move(policy); },
          "The GroupPolicy the group calls back into Python through; None: the empty policy "
          "(no vendor group, kernels not verified, no tuning table). xccl's creator sets the "
          "package's where the options given have none")
#if XCCL_TORCH_HAS_RECONFIGURE
      .def_readwrite("enable_reconfigure", &Options::enable_reconfigure,
                     "Connect nothing at creation: torch.distributed._reconfigure forms the "
                     "membership (init_process_group(..., enable_reconfigure=True))")
#endif
      .def("__copy__", [](const Options& o) { return copyOptions(o); })
      .def("__deepcopy__", [](const Options& o, py::dict) { return copyOptions(o); });

  py::class_<ProcessGroupXccl, c10d::Backend, c10::intrusive_ptr<ProcessGroupXccl>>(
      m, "ProcessGroupXccl")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       const c10::intrusive_ptr<Options>& options) {
             return c10::make_intrusive<ProcessGroupXccl>(store, rank, size, options);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("options"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("options",
                             [](ProcessGroupXccl& pg) {
                               return c10::static_intrusive_pointer_cast<Options>(
                                   pg.getBackendOptions());
                             })
      .def_property_readonly("shm_segment", &ProcessGroupXccl::shmSegmentName,
                             "Name this rank's shared-memory segment had in /dev/shm (unlinked "
                             "at creation); empty without one")
      .def_property_readonly("transport", &ProcessGroupXccl::transportName,
                             "How the group's collectives travel: 'shm' (every rank on one "
                             "host), 'hierarchical' (shared memory inside each host and the "
                             "network between hosts) or 'tcp'")
      .def_property_readonly("peer_transport", &ProcessGroupXccl::peerTransportName,
                             "What carries messages to peers: 'shm' (every rank on this host), "
                             "'shm+tcp' or 'shm+ofi' (shared memory to this host's ranks, "
                             "XCCL_NET's engine to the others), 'tcp' or 'ofi'");

#if XCCL_TORCH_HAS_WINDOW
  // torch's Window with xccl's extra writes; dist._new_window returns this class on xccl groups.
  // python/xccl/window.py wraps the extras (page lists as tensors, docstrings).
  py::class_<XcclWindow, c10d::Window, c10::intrusive_ptr<XcclWindow>>(m, "Window")
      .def("_put_pages", &XcclWindow::putPages, py::arg("src"), py::arg("src_pages"),
           py::arg("dst_rank"), py::arg("dst_pages"), py::arg("page_elems"), py::arg("async_op"),
           py::call_guard<py::gil_scoped_release>())
      .def("_put_strided", &XcclWindow::putStrided, py::arg("src"), py::arg("dst_rank"),
           py::arg("target_offset_nelems"), py::arg("dst_row_stride_nelems"), py::arg("async_op"),
           py::call_guard<py::gil_scoped_release>());
#endif

  m.def(
      "_failed_work",
      [](const std::string& kind, const std::string& message) {
        for (ErrorKind k : {ErrorKind::kInternal, ErrorKind::kInvalidArgument, ErrorKind::kTimeout,
                            ErrorKind::kPeerFailure, ErrorKind::kSystem, ErrorKind::kAborted}) {
          if (kind != errorKindName(k)) continue;
          auto work =
              c10::make_intrusive<XcclWork>(0, c10d::OpType::UNKNOWN, "test", 0,
                                            std::vector<at::Tensor>{}, std::chrono::seconds(10));
          work->fail(k, message);
          return c10::intrusive_ptr<c10d::Work>(work);
        }
        TORCH_CHECK_VALUE(false, "unknown error kind '", kind, "'");
      },
      "For tests: a Work that failed as a CPU-side operation does when an xccl error of `kind` "
      "(common/error.h's errorKindName) reaches it, e.g. 'invalid argument' or 'timeout'.");

  m.def(
      "_compressed_allreduce",
      [](const c10::intrusive_ptr<c10d::Backend>& backend, const at::Tensor& tensor,
         const std::string& wire, bool betweenHostsOnly) {
        auto* group = dynamic_cast<ProcessGroupXccl*>(backend.get());
        TORCH_CHECK_VALUE(group != nullptr, "_compressed_allreduce: not an xccl backend");
        TORCH_CHECK_VALUE(wire == "bfloat16" || wire == "float16",
                          "_compressed_allreduce: wire must be 'bfloat16' or 'float16', not '",
                          wire, "'");
        return group->compressedAllreduce(tensor, wire == "bfloat16" ? at::kBFloat16 : at::kHalf,
                                          betweenHostsOnly);
      },
      py::arg("backend"), py::arg("tensor"), py::arg("wire"), py::arg("between_hosts_only"),
      py::call_guard<py::gil_scoped_release>(),
      "xccl.hooks' backend call: averages a float32/float64 CPU tensor in place over the "
      "group, its bytes on the wire as `wire`; returns the Work (its future holds [tensor]).");
  // The flight recorder (flight_recorder.h), for python/xccl/flight_recorder.py. Neither needs
  // the GIL while it builds the dump.
  m.def(
      "_flight_recorder_dump",
      [](bool onlyActive) {
        std::string data;
        {
          py::gil_scoped_release noGil;
          data = FlightRecorder::get().dump(onlyActive);
        }
        return py::bytes(data);
      },
      py::arg("only_active"), "This process's flight recorder dump: pickled, in torch's format.");
  m.def(
      "_flight_recorder_write",
      [](const std::string& prefix, bool onlyActive) {
        return FlightRecorder::get().write(prefix, onlyActive);
      },
      py::arg("prefix"), py::arg("only_active"), py::call_guard<py::gil_scoped_release>(),
      "Writes the dump to prefix (default: the user's cache folder, docs/training.md) + global "
      "rank; the path, or '' if not "
      "written.");
  m.def(
      "_flight_recorder_request_write",
      [](double waitSeconds) {
        const bool taken = FlightRecorder::get().requestWrite();
        FlightRecorder::get().awaitWrites(
            std::chrono::milliseconds(static_cast<int64_t>(waitSeconds * 1000)));
        return taken;
      },
      py::arg("wait_s"), py::call_guard<py::gil_scoped_release>(),
      "What a peer's status query does (for tests): asks the recorder's thread for a dump, then "
      "waits up to wait_s for it; whether the request was taken (one per interval).");
  m.def(
      "_flight_recorder_capacity", [] { return FlightRecorder::get().capacity(); },
      "Entries the flight recorder keeps (TORCH_FR_BUFFER_SIZE); 0 when it is off.");

  bindPlan(m);
  bindTuning(m);
}

}  // namespace xccl::backend
