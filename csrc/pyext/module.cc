// xccl._native: the machine topology (csrc/topo), the XCCL_* registry (csrc/common/env.cc) and
// the plan vocabulary (csrc/common/vocabulary.h) for Python, without torch.
//
// xccl/__init__.py applies environment defaults before it imports torch (NCCL, HIP and OpenMP
// read their variables when they start), and those defaults depend on what csrc/topo finds. So
// this module links only the torch-free libraries and uses the plain CPython API (pybind11 comes
// with torch's headers; xccl._C uses that copy). Topologies cross the boundary as the JSON of
// docs/topology.md: Python keeps the parsed dict, and each query re-reads the text, which costs
// well under a millisecond for a machine of 8 GPUs and is what keeps this interface small.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <exception>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/error.h"
#include "common/vocabulary.h"
#include "net/transport/ofi/cache.h"
#include "net/transport/ofi/transport.h"
#include "topo/links.h"
#include "topo/pci.h"
#include "topo/topology.h"

namespace xccl::pyext {
namespace {

// The one conversion from xccl errors to Python exceptions in this module, as the backend's:
// a bad argument (malformed topology, unknown GPU index) is ValueError, anything else
// RuntimeError. Sets the exception and returns nullptr for the caller to return.
PyObject* raise() {
  try {
    throw;
  } catch (const Error& error) {
    PyErr_SetString(error.kind() == ErrorKind::kInvalidArgument ? PyExc_ValueError
                                                                : PyExc_RuntimeError,
                    error.what());
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
  }
  return nullptr;
}

PyObject* text(const std::string& value) {
  return PyUnicode_FromStringAndSize(value.data(), static_cast<Py_ssize_t>(value.size()));
}

PyObject* intList(const std::vector<int>& values) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(values.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < values.size(); ++i) {
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), PyLong_FromLong(values[i]));
  }
  return list;
}

// A sequence of GPU indices (None: every GPU) as gpuLinkClass takes it.
bool readGpus(PyObject* object, std::vector<int>& gpus) {
  if (object == nullptr || object == Py_None) return true;
  PyObject* items = PySequence_Fast(object, "gpus must be a sequence of GPU indices");
  if (items == nullptr) return false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); ++i) {
    long gpu = PyLong_AsLong(PySequence_Fast_GET_ITEM(items, i));
    if (gpu == -1 && PyErr_Occurred()) {
      Py_DECREF(items);
      return false;
    }
    gpus.push_back(static_cast<int>(gpu));
  }
  Py_DECREF(items);
  return true;
}

PyObject* discover(PyObject*, PyObject*) {
  std::string json;
  std::exception_ptr failure;
  // Probing reads sysfs and may dlopen NVML (slow): other Python threads run meanwhile, and
  // nothing here touches a Python object until the GIL is back.
  PyThreadState* state = PyEval_SaveThread();
  try {
    json = topo::toJson(topo::discover());
  } catch (...) {
    failure = std::current_exception();
  }
  PyEval_RestoreThread(state);
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (...) {
      return raise();
    }
  }
  return text(json);
}

PyObject* discoverRoot(PyObject*, PyObject* args) {
  const char* root = nullptr;
  if (!PyArg_ParseTuple(args, "s:discover_root", &root)) return nullptr;
  try {
    // sysfs and procfs only: no vendor library (loading NVML can take a second), no addresses
    // (getifaddrs describes the running host, not the tree below `root`).
    topo::DiscoverOptions options;
    options.useVendorLibraries = false;
    options.probeAddresses = false;
    return text(topo::toJson(topo::discoverFromRoot(root, options)));
  } catch (...) {
    return raise();
  }
}

PyObject* load(PyObject*, PyObject* args) {
  const char* json = nullptr;
  if (!PyArg_ParseTuple(args, "s:load", &json)) return nullptr;
  try {
    return text(topo::toJson(topo::fromJson(json)));
  } catch (...) {
    return raise();
  }
}

PyObject* loadFile(PyObject*, PyObject* args) {
  const char* path = nullptr;
  if (!PyArg_ParseTuple(args, "s:load_file", &path)) return nullptr;
  try {
    return text(topo::toJson(topo::loadTopologyFile(path)));
  } catch (...) {
    return raise();
  }
}

PyObject* pciPathBetween(PyObject*, PyObject* args) {
  const char* pathA = nullptr;
  const char* pathB = nullptr;
  int numaA = -1, numaB = -1;
  if (!PyArg_ParseTuple(args, "sisi:pci_path_between", &pathA, &numaA, &pathB, &numaB)) {
    return nullptr;
  }
  return PyUnicode_FromString(topo::pciPathName(topo::pciPathBetween(pathA, numaA, pathB, numaB)));
}

PyObject* linkClass(PyObject*, PyObject* args) {
  const char* json = nullptr;
  PyObject* gpuObject = Py_None;
  if (!PyArg_ParseTuple(args, "s|O:link_class", &json, &gpuObject)) return nullptr;
  std::vector<int> gpus;
  if (!readGpus(gpuObject, gpus)) return nullptr;
  try {
    return PyUnicode_FromString(
        topo::linkClassName(topo::gpuLinkClass(topo::fromJson(json), gpus)));
  } catch (...) {
    return raise();
  }
}

PyObject* gpuNicPath(PyObject*, PyObject* args) {
  const char* json = nullptr;
  int gpu = 0, nic = 0;
  if (!PyArg_ParseTuple(args, "sii:gpu_nic_path", &json, &gpu, &nic)) return nullptr;
  try {
    return PyUnicode_FromString(
        topo::pciPathName(topo::gpuNicPath(topo::fromJson(json), gpu, nic)));
  } catch (...) {
    return raise();
  }
}

PyObject* nearestNics(PyObject*, PyObject* args) {
  const char* json = nullptr;
  int gpu = 0;
  if (!PyArg_ParseTuple(args, "si:nearest_nics", &json, &gpu)) return nullptr;
  try {
    return intList(topo::nearestNics(topo::fromJson(json), gpu));
  } catch (...) {
    return raise();
  }
}

PyObject* envVariables(PyObject*, PyObject*) {
  const auto& all = env::all();
  PyObject* rows = PyList_New(static_cast<Py_ssize_t>(all.size()));
  if (rows == nullptr) return nullptr;
  for (size_t i = 0; i < all.size(); ++i) {
    PyList_SET_ITEM(rows, static_cast<Py_ssize_t>(i),
                    Py_BuildValue("(sss)", all[i].name, all[i].defaultValue, all[i].meaning));
  }
  return rows;
}

// A tuple of what `make(row)` builds for each row; nullptr (an exception set) when one failed.
template <typename Row, size_t N, typename Make>
PyObject* tupleOf(const Row (&rows)[N], Make make) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(N));
  for (size_t i = 0; tuple != nullptr && i < N; ++i) {
    PyObject* item = make(rows[i]);
    if (item == nullptr) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), item);
  }
  return tuple;
}

PyObject* flag(bool value) { return PyBool_FromLong(value ? 1 : 0); }

// The plan vocabulary (common/vocabulary.h) for python/xccl/vocabulary.py: every table's rows in
// its enum's order, and the legal (collective, route, algorithm) triples of a tuning table.
PyObject* vocabularyRows(PyObject*, PyObject*) {
  using namespace vocab;
  PyObject* legal = PyList_New(0);
  for (const CollectiveRow& c : kCollectiveRows) {
    for (const CpuRouteRow& r : kCpuRouteRows) {
      for (const AlgorithmRow& a : kAlgorithmRows) {
        if (legal == nullptr || !cpuLegal(c.id, r.id, a.id)) continue;
        PyObject* triple = Py_BuildValue("(sss)", c.name, r.name, a.name);
        if (triple == nullptr || PyList_Append(legal, triple) < 0) Py_CLEAR(legal);
        Py_XDECREF(triple);
      }
    }
  }
  if (legal == nullptr) return nullptr;
  PyObject* legalTuple = PyList_AsTuple(legal);
  Py_DECREF(legal);
  return Py_BuildValue(
      "{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:(ss)}", "collectives",
      tupleOf(kCollectiveRows,
              [](const CollectiveRow& r) {
                return Py_BuildValue("(sNNNN)", r.name, flag(r.ring), flag(r.shmReduction),
                                     flag(r.hostReduction), flag(r.wholeRange));
              }),
      "cpu_routes", tupleOf(kCpuRouteRows, [](const CpuRouteRow& r) { return text(r.name); }),
      "algorithms",
      tupleOf(kAlgorithmRows,
              [](const AlgorithmRow& r) {
                return Py_BuildValue("(sNN)", r.name, flag(r.forceable),
                                     flag(r.kind != AlgorithmKind::kPlanner));
              }),
      "cpu_legal", legalTuple, "gpu_collectives",
      tupleOf(kGpuCollectiveRows,
              [](const GpuCollectiveRow& r) {
                return Py_BuildValue("(sN)", r.name, flag(hasKernel(r.id)));
              }),
      "gpu_routes",
      tupleOf(kGpuRouteRows,
              [](const GpuRouteRow& r) { return Py_BuildValue("(sN)", r.name, flag(r.tunable)); }),
      "gpu_kernels",
      tupleOf(kGpuKernelRows,
              [](const GpuKernelRow& r) {
                return Py_BuildValue("(sss)", r.name, r.family, name(r.collective));
              }),
      "gpu_forces",
      tupleOf(kGpuForceRows,
              [](const GpuForceRow& r) {
                PyObject* names = PyList_New(0);
                for (const char* n : {r.name, r.synonyms[0], r.synonyms[1]}) {
                  PyObject* item = n == nullptr || names == nullptr ? nullptr : text(n);
                  if (item != nullptr && PyList_Append(names, item) < 0) Py_CLEAR(names);
                  Py_XDECREF(item);
                }
                PyObject* tuple = names == nullptr ? nullptr : PyList_AsTuple(names);
                Py_XDECREF(names);
                return tuple;
              }),
      "localities", tupleOf(kLocalityRows, [](const LocalityRow& r) { return text(r.name); }),
      "vendors", kNcclWord, kRcclWord);
}

// The libfabric engine as this process would choose it, and the registration caches' totals
// over the transports this module's copy of net/transport/ofi created (python -m xccl doctor).
PyObject* ofiStatus(PyObject*, PyObject* args) {
  const char* storeHost = "";
  if (!PyArg_ParseTuple(args, "|s:ofi_status", &storeHost)) return nullptr;
  try {
    std::string why;
    const bool available = net::ofi::available(&why);
    const std::string detail = available ? net::ofi::describeChoice(storeHost) : why;
    const net::ofi::CacheStats s = net::ofi::processCacheStats();
    return Py_BuildValue("{s:O,s:s,s:L,s:K,s:K,s:K,s:K,s:K}", "available",
                         available ? Py_True : Py_False, "detail", detail.c_str(), "cache_capacity",
                         static_cast<long long>(env::getInt("XCCL_OFI_MR_CACHE_BYTES")), "entries",
                         static_cast<unsigned long long>(s.entries), "bytes",
                         static_cast<unsigned long long>(s.bytes), "hits",
                         static_cast<unsigned long long>(s.hits), "misses",
                         static_cast<unsigned long long>(s.misses), "evictions",
                         static_cast<unsigned long long>(s.evictions));
  } catch (...) {
    return raise();
  }
}

PyMethodDef kMethods[] = {
    {"discover", discover, METH_NOARGS,
     "discover() -> str: this machine's topology as JSON (docs/topology.md), probed once per "
     "process (sysfs, KFD, NVML, amdsmi); honours XCCL_TOPO_FILE and XCCL_TOPO_DUMP_FILE."},
    {"discover_root", discoverRoot, METH_VARARGS,
     "discover_root(root) -> str: the topology JSON of the sysfs/procfs tree below root ('/' "
     "for this machine), without vendor libraries; probed on every call."},
    {"load", load, METH_VARARGS,
     "load(text) -> str: topology JSON checked and rewritten in canonical form; ValueError when "
     "it is malformed, of another format or version, or refers to devices it does not list."},
    {"load_file", loadFile, METH_VARARGS, "load_file(path) -> str: as load(), from a file."},
    {"pci_path_between", pciPathBetween, METH_VARARGS,
     "pci_path_between(path_a, numa_a, path_b, numa_b) -> str: PIX, PXB, PHB, NODE, SYS or "
     "unknown for two sysfs device paths."},
    {"link_class", linkClass, METH_VARARGS,
     "link_class(topology_json, gpus=None) -> str: the class of the links among gpus (None: "
     "all): none, pcie, nvlink_partial, nvswitch, xgmi_partial, xgmi_full_mesh."},
    {"gpu_nic_path", gpuNicPath, METH_VARARGS,
     "gpu_nic_path(topology_json, gpu, nic) -> str: the PCIe path class between them."},
    {"nearest_nics", nearestNics, METH_VARARGS,
     "nearest_nics(topology_json, gpu) -> list: the usable NICs closest to the GPU (best path, "
     "then fastest), in topology order."},
    {"env_variables", envVariables, METH_NOARGS,
     "env_variables() -> list: (name, default, meaning) of every registered XCCL_* variable."},
    {"vocabulary", vocabularyRows, METH_NOARGS,
     "vocabulary() -> dict: the plan vocabulary of csrc/common/vocabulary.h (collectives, routes, "
     "algorithms, GPU kernels, XCCL_GPU_ALGO's choices, localities, vendor libraries) and the "
     "legal (collective, route, algorithm) triples of a tuning table; python/xccl/vocabulary.py "
     "reads it."},
    {"ofi_status", ofiStatus, METH_VARARGS,
     "ofi_status(store_host='') -> dict: whether the libfabric engine is usable here (available, "
     "detail: provider and interface, or why not), XCCL_OFI_MR_CACHE_BYTES (cache_capacity) and "
     "the registration caches' entries, bytes, hits, misses and evictions in this process."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    "_native",
    "xccl's machine topology and XCCL_* registry, without torch (csrc/pyext/module.cc).",
    -1,  // no per-module state: the probed topology is process-wide in csrc/topo
    kMethods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace
}  // namespace xccl::pyext

PyMODINIT_FUNC PyInit__native() {
  using namespace xccl;
  PyObject* module = PyModule_Create(&pyext::kModule);
  if (module == nullptr) return nullptr;
  // PCI_PATHS: the path classes best first, as topo::PciPath orders them.
  PyObject* paths = PyTuple_New(6);
  const topo::PciPath order[] = {topo::PciPath::kPix, topo::PciPath::kPxb,
                                 topo::PciPath::kPhb, topo::PciPath::kNode,
                                 topo::PciPath::kSys, topo::PciPath::kUnknown};
  for (int i = 0; paths != nullptr && i < 6; ++i) {
    PyTuple_SET_ITEM(paths, i, PyUnicode_FromString(topo::pciPathName(order[i])));
  }
  if (PyModule_AddStringConstant(module, "FORMAT_NAME", topo::kFormatName) < 0 ||
      PyModule_AddIntConstant(module, "FORMAT_VERSION", topo::kFormatVersion) < 0 ||
      paths == nullptr || PyModule_AddObject(module, "PCI_PATHS", paths) < 0) {
    Py_XDECREF(paths);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
